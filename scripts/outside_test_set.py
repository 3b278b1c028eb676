"""Gather the kicks the starter kit left out of its first four packages into a folder: an outside test set.

    apt-get install -y --no-install-recommends hydrogen-drumkits hydrogen-data sonic-pi-samples lmms-common
    python scripts/outside_test_set.py /tmp/outside              # then: kicktrain eval MODEL --real /tmp/outside ...

The kit (kickserver/data/kicks) took some kicks of hydrogen-drumkits, hydrogen-data, sonic-pi-samples and
lmms-common and none since; the rest of those packages' kicks are real kicks that no model trained on the
kit has seen. This script finds them: files under the packages' sample folders whose name says kick (as
scripts/extract_kicks.py's KICK_NAME), or that a Hydrogen drumkit.xml plays as an instrument named kick or
bass drum; leaves out every file the kit's MANIFEST.csv lists; and keeps those that measure like one kick
hit and are neither identical to nor a near-copy (normalised cross-correlation >= 0.98 of the prepared
clips) of a kit file or of each other, exactly as extract_kicks.py chooses (its `choose`). The output is
mono 44.1 kHz FLAC plus a MANIFEST.csv in the kit's format, written atomically; OUT must be empty, new, or
a folder this script wrote before (its files are then replaced). Never commit the folder: its point is
that nothing in the repository has seen it.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import soundfile as sf

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import extract_kicks as E  # noqa: E402

# (package, folder under /usr/share, license as the kit's manifest states it for that package)
PACKAGES = (
    ("hydrogen-drumkits", "hydrogen/data/drumkits", "see debian/copyright"),
    ("hydrogen-data", "hydrogen/data/drumkits", "GPL"),
    ("sonic-pi-samples", "sonic-pi/samples", "CC0-1.0"),
    ("lmms-common", "lmms/samples", "GPL-2.0-or-later"),
)
HYDROGEN_DATA_KITS = ("GMRockKit", "TR808EmulationKit")  # the kits hydrogen-data ships; the rest: hydrogen-drumkits
INSTRUMENT_KICK = re.compile(r"kick|bass ?drum", re.IGNORECASE)
MAX_XML_BYTES = 1 << 20


def _package(rel: str) -> tuple[str, str]:
    """(package, license) of a path relative to /usr/share."""
    if rel.startswith("hydrogen/"):
        kit = rel.split("/")[3] if rel.count("/") >= 4 else ""
        name = "hydrogen-data" if kit in HYDROGEN_DATA_KITS else "hydrogen-drumkits"
    else:
        name = next(p for p, folder, _ in PACKAGES if rel.startswith(folder + "/"))
    return name, next(lic for p, _, lic in PACKAGES if p == name)


def hydrogen_kicks(drumkits: Path) -> set[Path]:
    """Sample files that a drumkit.xml plays as an instrument named kick or bass drum."""
    out: set[Path] = set()
    for xml in sorted(drumkits.glob("*/drumkit.xml")):
        if xml.stat().st_size > MAX_XML_BYTES:
            continue
        try:
            root = ET.fromstring(xml.read_bytes())
        except ET.ParseError:
            continue
        for inst in root.iter():
            if not inst.tag.endswith("instrument"):
                continue
            name = next((c.text or "" for c in inst if c.tag.endswith("name")), "")
            if INSTRUMENT_KICK.search(name):
                for fn in inst.iter():
                    if fn.tag.endswith("filename") and fn.text:
                        out.add((xml.parent / fn.text.strip()).resolve())
    return out


def candidates(root: Path, listed: set[str]) -> tuple[list[E.Candidate], list[tuple[str, str]]]:
    share = root / "usr" / "share"
    folders = sorted({folder for _, folder, _ in PACKAGES})
    for _, folder, _ in PACKAGES:
        if not (share / folder).is_dir():
            raise E.ExtractError(f"{share / folder} is missing: install the package that ships it")
    by_xml = hydrogen_kicks(share / "hydrogen/data/drumkits")
    out: list[E.Candidate] = []
    skipped: list[tuple[str, str]] = []
    for folder in folders:
        for p in sorted((share / folder).rglob("*")):
            if not p.is_file() or p.suffix.lower() not in (".wav", ".flac", ".ogg", ".aif", ".aiff"):
                continue
            rel = p.relative_to(share).as_posix()
            if rel in listed or p.name.startswith("."):
                continue
            if not (E.KICK_NAME.search(p.stem) or p.resolve() in by_xml):
                continue
            package, lic = _package(rel)
            try:
                info = sf.info(str(p))
                if info.frames / info.samplerate > E.MAX_SOURCE_SECONDS:
                    skipped.append((rel, f"longer than {E.MAX_SOURCE_SECONDS:g} s: a loop, not one hit"))
                    continue
                x, sr = sf.read(str(p), dtype="float32", always_2d=True)
            except (sf.LibsndfileError, RuntimeError, OSError) as e:
                skipped.append((rel, f"unreadable: {e}"))
                continue
            src = E.Source(package, lic, "", "files", ())
            name = E._clean_name("_".join(Path(rel).relative_to(folder).with_suffix("").parts))
            out.append(E.Candidate(src, name, rel, E.to_mono_44k(x, sr)))
    return out, skipped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the folder to fill (empty, new, or written by this script before)")
    ap.add_argument("--root", default="/", help="where the Debian packages are installed (default /)")
    ap.add_argument("--kit", default=str(E.REPO / "kickserver" / "data" / "kicks"))
    args = ap.parse_args(argv)
    out, kit = Path(args.out), Path(args.kit)
    try:
        if out.resolve() == kit.resolve():
            raise E.ExtractError(f"{out} is the kit itself: the outside test set must live elsewhere")
        old: list[dict[str, str]] = []
        if out.is_dir() and any(out.iterdir()):
            if not (out / "MANIFEST.csv").is_file():
                raise E.ExtractError(f"{out} is not empty and has no MANIFEST.csv: not a folder this script wrote")
            old = E.read_manifest(out)
        rows = E.read_manifest(kit)
        from kickmodel.clips import load_clip

        cfg = E.DataConfig()
        ref = [(r["file"], load_clip(kit / r["file"], cfg)[0]) for r in rows]
        cands, skipped = candidates(Path(args.root), {r["original_path"] for r in rows})
        choice = E.choose(cands, ref, cfg)
    except E.ExtractError as e:
        print(f"outside_test_set: {e}", file=sys.stderr)
        return 2
    for what, why in skipped + choice.skipped:
        print(f"skip {what}: {why}")
    out.mkdir(parents=True, exist_ok=True)
    new_rows, used = [], set()
    for c, x in choice.kept:
        name = E._unique(c.name, used) + ".flac"
        E.atomic_write_bytes(out / name, E.flac_bytes(x))
        new_rows.append({"file": name, "seconds": f"{len(x) / E.SAMPLE_RATE:.3f}",
                         "debian_package": c.source.package, "original_path": c.original, "license": c.source.license})
    E.atomic_write_bytes(out / "MANIFEST.csv", E.manifest_bytes(new_rows))
    for r in old:
        if r["file"] not in {n["file"] for n in new_rows} and "/" not in r["file"]:
            (out / r["file"]).unlink(missing_ok=True)
    counts: dict[str, int] = {}
    for r in new_rows:
        counts[r["debian_package"]] = counts.get(r["debian_package"], 0) + 1
    print(f"wrote {len(new_rows)} kicks to {out} (" + ", ".join(f"{n} from {p}" for p, n in counts.items())
          + f"); {len(skipped) + len(choice.skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
