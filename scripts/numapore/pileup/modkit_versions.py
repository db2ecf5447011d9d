"""The modkit releases whose `modkit pileup` semantics the pileup follows, and the options only
0.4.4 has: what the command line (cli) and the workflow's settings (settings) both check."""

from __future__ import annotations

# --modkit-compat (the config's pileup.modkit): whose semantics, the first the default
MODKIT_VERSIONS = {"0.6": "modkit 0.6.1", "0.4": "modkit 0.4.4"}
DEFAULT_VERSION = "0.6"
# modkit 0.4's options that 0.6.1 removed (by argparse dest), each with what 0.6.1 offers instead
ONLY_04 = {
    "only_tabs": ("--only-tabs", "drop it: 0.6 writes tabs only"),
    "mixed_delim": ("--mixed-delim", "drop it: 0.6 writes tabs only"),
    "preset": (
        "--preset traditional",
        "--modified-bases 5mC 5hmC --combine-mods --cpg --combine-strands",
    ),
    "ignore": ("--ignore", "--modified-bases with the codes to keep (others count as N_other)"),
    "force_allow_implicit": ("--force-allow-implicit", "drop it: 0.6 reads implicit tags"),
    "invert_edge_filter": ("--invert-edge-filter", "none (0.6 has no inverted edge filter)"),
}
