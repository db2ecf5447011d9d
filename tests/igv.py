"""IGV desktop (Debian's igv) run headless under Xvfb on a batch script: open a session, go to a
locus, save a snapshot. Its own preferences folder, no batch port (tests may run side by side),
and the reference as its default genome (otherwise it fetches hg19 first)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

IGV_JAR = Path("/usr/share/java/igv.jar")
# Lines IGV logs at SEVERE when it has no network (its genome list, OAuth settings): not errors
# of what it was asked to show.
OFFLINE = ("UnknownHostException", "Error fetching oAuth", "Error fetching genome list")


def missing() -> list[str]:
    """What a headless IGV needs and this machine lacks (./setup.sh --tests installs it)."""
    lacking = [p for p in ("xvfb-run", "java") if shutil.which(p) is None]
    return lacking + ([str(IGV_JAR)] if not IGV_JAR.exists() else [])


def snapshot(session: Path, reference: Path, locus: str, folder: Path) -> tuple[Path, list[str]]:
    """Open session in IGV, show locus, save folder/igv.png; returns the PNG and IGV's SEVERE
    log lines that are not about the missing network."""
    home = folder / "home"
    (home / "igv").mkdir(parents=True, exist_ok=True)
    (home / "igv" / "prefs.properties").write_text(
        f"PORT_ENABLED=false\nDEFAULT_GENOME_KEY={reference.resolve()}\n"
    )
    batch = folder / "batch.txt"
    batch.write_text(
        f"load {session.resolve()}\ngoto {locus}\nsnapshotDirectory {folder.resolve()}\n"
        "snapshot igv.png\nexit\n"
    )
    command = ["xvfb-run", "-a", "java", f"-Duser.home={home.resolve()}", "-cp", str(IGV_JAR)]
    command += ["org.broad.igv.ui.Main", "-b", str(batch.resolve())]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    log = done.stdout + done.stderr
    (folder / "igv.log").write_text(log)
    severe = [
        line
        for line in log.splitlines()
        if line.startswith("SEVERE") and not any(o in line for o in OFFLINE)
    ]
    return folder / "igv.png", severe + (
        [f"igv exited {done.returncode}"] if done.returncode else []
    )
