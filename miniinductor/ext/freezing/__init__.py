"""Extension `freezing`: inference graphs' parameters become constants, and what depends on
them alone runs once at compile time (capture/freezing.py)."""
from ...config import declare_extension

declare_extension("freezing", "inference: parameters as constants, folded at compile time", ("freezing",))
