"""The coding agent: ``agent_loop`` with memory woven in, its tools, and ``memdir chat``."""

from memdir_agent.loop import Turn, agent_loop
from memdir_agent.tools import Tools
from memdir_agent.worker import MemoryWorker

__all__ = ["MemoryWorker", "Tools", "Turn", "agent_loop"]
