"""Extension `freezing`: inference graphs' parameters become constants, and what depends on
them alone runs once at compile time (freeze.py: a `capture` pass that wraps AOTAutograd's
inference compiler)."""
from ...config import declare_extension
from ...passes import Pass, register
from .freeze import freeze_parameters

declare_extension("freezing", "inference: parameters as constants, folded at compile time", ("freezing",))

register(Pass("capture", "freeze_parameters", freeze_parameters, "freezing",
              enabled=lambda ctx: ctx.config.freezing,
              doc="inference: parameters → constants, folded at compile time"))
