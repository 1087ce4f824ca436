"""Peak memory and time of ``kwiki ingest`` at 1x, 10x and 100x today's corpora (the real build path).

The larger corpora are made by ``benchmarks/synthetic_corpus.py`` (copies of the real pages with renamed ids,
retitled and with words dropped; their vectors pre-filled in the embedding cache from the originals' real vectors
plus noise). Every run is a fresh ``kwiki ingest --force`` process, measured by ``/usr/bin/time`` (maximum resident
set size); all runs share one embedding cache (``<work>/cache``, linked as each index's ``cache``). At 1x the first
run embeds what the seed cache lacks with the real model and the second, measured, finds everything cached, as the
larger runs do.

    python benchmarks/ingest_memory.py --factors 1,10,100 --work /tmp/kwiki-scale

Not a test: figures depend on the machine and its load (recorded beside them). Results go to
``benchmarks/results/ingest-scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(os.environ.get("KWIKI_SNAPSHOT", REPO.parent / "shared" / "kernelwiki-snapshot"))
KWIKI = "from kwiki.service.cli import main; main()"


def ingest(index: Path, roots: list[str]) -> dict:
    cmd = ["/usr/bin/time", "-f", "%M %e", sys.executable, "-c", KWIKI, "ingest", "--index-dir", str(index),
           "--json", "--force", *[a for r in roots for a in ("--corpus", r)]]
    load = os.getloadavg()[0]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rss_kib, seconds = done.stderr.strip().splitlines()[-1].split()
    man = json.loads(done.stdout)["manifest"]
    return {"peak_rss_mib": round(int(rss_kib) / 1024, 1), "wall_s": float(seconds), "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2), "pages": man["counts"]["pages"], "chunks": man["counts"]["chunks"],
            "sentences_and_questions": man["counts"]["sentences"] + man["counts"]["questions"],
            "embedded": man["embedded"], "ann": man.get("ann", {}), "build_seconds": man["build_seconds"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--factors", default="1,10,100")
    ap.add_argument("--work", type=Path, default=Path("/tmp/kwiki-scale"))
    ap.add_argument("--titles-only", action="store_true", help="synthetic_corpus.py --titles-only")
    ap.add_argument("--seed-cache", type=Path, default=REPO / ".kwiki" / "cache",
                    help="embedding caches of earlier builds (.npz): the real vectors of the original pages")
    args = ap.parse_args()
    cache = args.work / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    for seed in args.seed_cache.glob("*.npz"):  # the real vectors earlier builds embedded (imported once)
        if not (cache / seed.name).exists():
            shutil.copy(seed, cache / seed.name)
    out = REPO / "benchmarks" / "results" / "ingest-scale.json"
    rows = json.loads(out.read_text())["rows"] if out.exists() else []
    for factor in (int(f) for f in args.factors.split(",")):
        index = args.work / f"index-x{factor}"
        index.mkdir(parents=True, exist_ok=True)
        if not (index / "cache").exists():
            (index / "cache").symlink_to(cache)
        if factor == 1:
            roots = [f"kwiki={REPO / 'corpus'}", f"kernelwiki={SNAPSHOT}"]
            ingest(index, roots)  # embeds what the seed cache lacks; the next run is the measured one
            gen_s = 0.0
        else:
            t = time.time()
            subprocess.run([sys.executable, str(REPO / "benchmarks" / "synthetic_corpus.py"), "--factor", str(factor),
                            "--out", str(args.work / f"x{factor}"), "--cache", str(cache),
                            *(["--titles-only"] if args.titles_only else [])], check=True)
            gen_s = round(time.time() - t, 1)
            roots = [f"kwiki={args.work / f'x{factor}' / 'kwiki'}", f"kernelwiki={args.work / f'x{factor}' / 'kernelwiki'}"]
        row = {"factor": factor, "copies": "as they are" if factor == 1 else "titles-only" if args.titles_only
               else "words dropped", "generate_s": gen_s, **ingest(index, roots)}
        print(json.dumps(row), flush=True)
        rows = [r for r in rows if (r["factor"], r.get("copies")) != (factor, row["copies"])] + [row]
        out.write_text(json.dumps({"command": "python benchmarks/ingest_memory.py", "rows": sorted(rows, key=lambda r: r["factor"])},
                                  indent=1) + "\n")


if __name__ == "__main__":
    main()
