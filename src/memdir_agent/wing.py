"""The agent wing's part in the core's moments (``memdir.wings``): the background job that
runs the extraction an exiting agent handed over (``worker.handover_job``)."""

from __future__ import annotations

from memdir_agent.worker import handover_job

__all__ = ["handover_job"]
