"""The log switches moved beside metrics (miniinductor/logs.py): this path still works."""
from ..logs import LOG_NAMES, get_logger, set_logs  # noqa: F401
