"""Embedders besides the core's MiniLM, chosen by the ``embedder`` setting and found by the core
through the ``memdir.embedders`` entry points: ``e5`` (multilingual, ``memdir[e5]``) and
``http`` (an OpenAI-compatible endpoint)."""
