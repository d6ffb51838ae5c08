"""The Anthropic memory tool (``memory_20250818``) backed by a memdir store: ``tool``
(``memdir[anthropic]``)."""

from memdir_memorytool.tool import MemdirMemoryTool

__all__ = ["MemdirMemoryTool"]
