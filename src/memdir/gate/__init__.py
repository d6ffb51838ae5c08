"""What a model may see and what stands as the user's: who wrote a text (``provenance``), what
the user decided of it (``decisions``: accepted, held for review), whether it reads as an
instruction planted for an agent (``instructions``), credentials kept out (``secrets``), text
made safe for a prompt or a terminal (``safetext``), and which config files the user trusts
(``trust``). This package does NOT open stores."""
