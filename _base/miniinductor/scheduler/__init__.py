"""Phase 4: buffers → an ordered list of kernels (scheduler.py)."""
from .scheduler import ExternKernelSchedulerNode, FusedGroup, Scheduler, SchedulerNode  # noqa: F401
