"""What memdir knows of code: a convention's slot and whether a change breaks it
(``conventions``), and the files and symbols a memory names, checked against the working
tree (``anchors``)."""
