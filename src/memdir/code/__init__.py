"""What memdir knows of code: a convention's slot (``conventions``), what code or a command
breaks it (``breaks``), and the files and symbols a memory names, checked against the working
tree (``anchors``)."""
