"""The command line: ``gradcheck run``, ``list``, ``functions``, ``explain``,
``doctor`` and ``bench`` (:mod:`.main` parses, the others act)."""
