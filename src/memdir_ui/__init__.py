"""``memdir ui``: a local web app to see and steer what agents remember.

Server-rendered pages (Starlette, Jinja2) over every store in scope: the memories with search
and filters, one memory with its versions and diffs and the actions a person takes on it, the
review queue, the activity timeline with charts, and the recall log. It listens on 127.0.0.1
only and lets in the browser that opened the one-time link ``memdir ui`` printed (``app``).
Every change goes through ``Store`` as the command line's do. Imported only by
``memdir ui`` (``memdir[ui]``).
"""
