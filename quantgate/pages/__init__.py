"""Page sets: import, synthesise, split, check. Imports no other stage."""

from quantgate.pages.pageset import PageSet, check_pageset, load_pageset, pageset_stats, split_of

__all__ = ["PageSet", "check_pageset", "load_pageset", "pageset_stats", "split_of"]
