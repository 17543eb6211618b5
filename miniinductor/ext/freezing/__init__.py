"""Extension `freezing`: inference graphs' parameters become constants, and what depends on
them alone runs once at compile time (freeze.py: a `capture` pass that wraps AOTAutograd's
inference compiler)."""
from ...config import Option, declare_extension
from ...passes import Pass, register
from .freeze import freeze_parameters

declare_extension("freezing", "inference: parameters as constants, folded at compile time", (
    Option("freezing", bool, False, "Inference only: parameters and buffers become constants, and ops on them "
           "alone run once at compile time (later changes to them may not be seen)."),),
    presets={"freezing": {"freezing": True}})

register(Pass("capture", "freeze_parameters", freeze_parameters, "freezing",
              enabled=lambda ctx: ctx.config.freezing,
              doc="inference: parameters → constants, folded at compile time"))
