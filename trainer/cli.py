"""`kicktrain`: prepare data, fit, export, sample and evaluate kick models.

    kicktrain prepare DATA_DIR... [--cache DIR]
    kicktrain fit DATA_DIR... --run-dir RUN [--family waveform-diffusion] [--preset tiny|small|base] [--train-steps N]
                  [--device auto|cpu|cuda] [--export-dir DIR] [--init ARTIFACT] [--vram-budget GB]
                  [--set section.key=value ...] [the family's options, e.g. --vae FILE]
    kicktrain export RUN --out NAME.safetensors [--set sampling.steps=25 ...] [the family's options]
    kicktrain sample ARTIFACT --n 8 --out DIR [--seed S] [--steps K] [--sampler NAME] [--control decay=0.8 ...]
    kicktrain eval ARTIFACT [ARTIFACT...] --real DIR [--train DIR] [--out DIR]
    kicktrain map ARTIFACT DATA_DIR... --out DIR [--perplexity 30]   (ARTIFACT: any model that can encode, e.g.
                  kickserver/models/default.safetensors)
    kicktrain profile DATA_DIR... --out DIR [--family F] [--preset P] [--steps 8] [--trace-steps 1] [--detail]
                  [--device auto]
    torchrun --standalone --nproc-per-node 2 -m trainer fit ...   (DistributedDataParallel; see distributed.py)

A family's own options (latent diffusion's --vae) are declared in its training recipe (trainer/recipes/<name>.py:
Recipe.options); fit, export and profile make their flags from the recipes' registry, and refuse one the family does
not take. What an export may change (--set) is the recipe's too (Recipe.export_keys).

`fit --train-steps N` is how many training steps the run takes (train.max_steps); `--max-steps` is its older name,
still taken (`kickserver serve --max-steps` is another thing: the most sampler steps a request may ask for).

Errors a user can fix print one line and exit 2; nothing is left half-written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from kickmodel import safejson
from kickmodel.config import SEED_LIMIT, ConfigError
from kickmodel.families import cli_name, family_names, from_dict, get_family, preset

from . import __version__
from .recipes import get_recipe, options_for, recipe_names

# The family prepare, fit and profile train when neither --family nor an --init artifact names one (a choice of
# this CLI, free to change; a config that names no family is kickmodel.config.UNNAMED_FAMILY, for good).
DEFAULT_CLI_FAMILY = "waveform_diffusion"


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def apply_overrides(cfg, items: list[str]):
    """--set model.widths=[32,64] train.lr=1e-4 (values are JSON; bare words are strings)."""
    d = cfg.to_dict()
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise ConfigError(f"--set {item!r}: expected section.key=value")
        section, name = key.split(".", 1)
        if section not in d or not isinstance(d[section], dict):
            raise ConfigError(f"--set {item!r}: unknown section {section!r} (family {cli_name(cfg.family)} has "
                              f"{', '.join(k for k, v in d.items() if isinstance(v, dict))})")
        if name not in d[section]:
            raise ConfigError(f"--set {item!r}: unknown key {name!r} in {section}")
        d[section][name] = _parse_value(value)
    if items:
        d["preset"] = cfg.preset
    return from_dict(d)


def _family(text: str) -> str:
    return text.replace("-", "_")


def _cmd_prepare(args: argparse.Namespace) -> int:
    from .data import default_cache_dir, prepare

    cfg = apply_overrides(preset(args.preset, _family(args.family)), args.set or []).data
    cache = Path(args.cache) if args.cache else default_cache_dir(args.data, cfg)
    ds = prepare(args.data, cfg, cache)
    print(f"{len(ds)} clips of {cfg.length} samples at {cfg.sample_rate} Hz in {cache} "
          "(kicktrain fit with the same folders and data settings uses this cache)")
    return 0


def _init_defaults(args: argparse.Namespace) -> tuple[str, str]:
    """(family, preset) of a fit: as given, else the run's own (resuming RUN needs no --family), else those of
    the --init artifact (fine-tuning a model means its family; its preset when it has one of its family's
    names), else the defaults."""
    family, name = args.family, args.preset
    saved = Path(args.run_dir) / "config.json"
    if (family is None or name is None) and saved.is_file():
        try:  # resuming: the run's own family and preset (fit itself checks the whole config)
            run_cfg = safejson.read(saved, max_bytes=1 << 20)
        except (OSError, ValueError):  # safejson.BadJSON: too large, too deeply nested, not JSON
            run_cfg = None
        if isinstance(run_cfg, dict) and isinstance(run_cfg.get("family"), str):
            family = family or cli_name(run_cfg["family"])
            if name is None and isinstance(run_cfg.get("preset"), str) and run_cfg["preset"] != "custom":
                name = run_cfg["preset"]
    if args.init and (family is None or name is None):
        from kickmodel.artifact import ArtifactError, read_metadata
        from kickmodel.families import get_family

        meta = read_metadata(Path(args.init))  # the header only; fit loads and checks the whole file
        try:
            theirs = get_family(meta.get("family", ""))
        except ConfigError as e:
            raise ArtifactError(f"{args.init}: not an artifact this kicktrain can fine-tune ({e})") from None
        try:
            their_preset = safejson.parse(meta.get("config", "{}"), max_bytes=1 << 20).get("preset")
        except (ValueError, AttributeError):
            their_preset = None
        family = family or theirs.cli_name
        if name is None and their_preset in theirs.presets():
            name = their_preset
    return family or cli_name(DEFAULT_CLI_FAMILY), name or "small"


def _cmd_fit(args: argparse.Namespace) -> int:
    from .train import FitOptions, fit

    family, preset_name = _init_defaults(args)
    cfg = apply_overrides(preset(preset_name, _family(family)), args.set or [])
    family_options = get_recipe(cfg.family).take_options(given_options(args), "fit")
    opts = FitOptions(data=args.data, run_dir=Path(args.run_dir), cfg=cfg, device=args.device,
                      max_steps=args.train_steps, export_dir=Path(args.export_dir) if args.export_dir else None,
                      export_name=args.export_name, init=Path(args.init) if args.init else None,
                      vram_budget_gb=args.vram_budget, progress=not args.no_progress,
                      tensorboard=not args.no_tensorboard, family_options=family_options,
                      cache_dir=Path(args.cache) if args.cache else None, minutes=args.minutes)
    summary = fit(opts, log=lambda m: print(m, file=sys.stderr, flush=True))
    if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 answers for the run
        print(json.dumps({k: v for k, v in summary.items() if k != "config"}, allow_nan=False))
    return 0


def _cmd_profile(args: argparse.Namespace) -> int:
    from .profiling import format_summary, profile_training
    from .train import FitOptions

    cfg = apply_overrides(preset(args.preset, _family(args.family)), args.set or [])
    family_options = get_recipe(cfg.family).take_options(given_options(args), "profile")
    opts = FitOptions(data=args.data, run_dir=Path(args.out) / ".run", cfg=cfg, device=args.device,
                      family_options=family_options)
    out = Path(args.out)
    summary = profile_training(opts, args.steps, out, log=lambda m: print(m, file=sys.stderr),
                               trace_steps=args.trace_steps, detail=args.detail)
    print(format_summary(summary))
    traces = ", ".join(str(out / t) for t in summary["traces"])
    what = "shapes and memory" if summary["detail"] else "no shapes or memory: --detail records them"
    print(f"\nwrote {out / 'summary.json'}, the picture {out / summary['picture']} (where a step's time goes) and "
          f"the trace {traces} ({summary['trace_mb']:.1f} MB: the last {summary['trace_steps']} recorded "
          f"step{'s' if summary['trace_steps'] != 1 else ''}, {what})")
    print("open the trace at https://ui.perfetto.dev (Open trace file, or drag it in) or chrome://tracing; "
          f"TensorBoard needs its plugin: pip install torch-tb-profiler, then tensorboard --logdir {out}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .export import export_run

    settings = {}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise ConfigError(f"--set {item!r}: expected section.key=value")
        settings[key] = _parse_value(value)
    path = export_run(Path(args.run), Path(args.out), settings, log=lambda m: print(m, file=sys.stderr),
                      family_options=given_options(args),  # the run's family takes them (or refuses)
                      map_data=args.map_data)
    print(f"exported {path}")
    return 0


def _parse_controls(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--control {item!r}: expected name=value")
        out[name] = float(value)
    return out


def _cmd_sample(args: argparse.Namespace) -> int:
    import numpy as np

    from kickmodel import __version__
    from kickmodel.fsutil import atomic_write_bytes
    from kickmodel.loading import load_generator
    from kickmodel.offline import render_kicks
    from kickmodel.wavfile import KickInfo, encode_wav, with_measures

    gen = load_generator(Path(args.artifact), args.device)
    controls = _parse_controls(args.control or [])
    seed = args.seed if args.seed is not None else int(np.random.default_rng().integers(0, SEED_LIMIT - 16))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def write(audio: np.ndarray, info: KickInfo) -> Path:
        path = out / f"{gen.name}_{info.seed}.wav"
        info, pitch = with_measures(audio, gen.sample_rate, info)  # as the daemon tags its kicks
        atomic_write_bytes(path, encode_wav(audio, gen.sample_rate, info.tags(path.stem), pitch_hz=pitch))
        return path

    for path in render_kicks(gen, first_seed=seed, n=args.n, controls=controls,
                             settings=gen.settings(args.steps, args.sampler), write=write, batch=args.n,
                             software=f"kicktrain {__version__}"):
        print(path)
    return 0


def _cmd_map(args: argparse.Namespace) -> int:
    from .latent_map import make_map

    for path in make_map(args.artifact, args.data, args.out, into=args.into, split=args.split,
                         perplexity=args.perplexity, seed=args.seed, device=args.device,
                         log=lambda m: print(m, file=sys.stderr)):
        print(path)
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from .evaluate import main as eval_main

    return eval_main(args)


FAMILY_OPTION_DEST = "family_option_"  # argparse dest prefix of the families' own options


def add_family_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """A flag for each option the registered recipes declare on `command` (trainer.recipes.base.FamilyOption:
    fit, export, profile, bench), so a family's options need no line here. Families that declare one name share
    its flag; its help says which families take it. Read back with given_options; the family's recipe then takes
    or refuses them (Recipe.take_options)."""
    for name, owners in options_for(command).items():
        first = owners[0][1]
        parser.add_argument(first.flag, dest=FAMILY_OPTION_DEST + name, metavar=first.metavar,
                            help="; ".join(f"{rec.cli_name}: {opt.help}" for rec, opt in owners).replace("%", "%%"))


def _export_keys_help() -> str:
    """What `kicktrain export --set` may change, family by family, from the recipes (Recipe.export_keys)."""
    recipes = [get_recipe(n) for n in recipe_names()]
    return "; ".join(f"{r.cli_name}: " + ", ".join(f"{s}.{k}" for s, keys in r.export_keys.items() for k in keys)
                     for r in recipes)


def _encoding_families() -> str:
    """The registered families whose generator can encode (a map, a fine-tune's VAE): from the registry."""
    from kickmodel.generator import ENCODE

    return ", ".join(cli_name(n) for n in family_names() if ENCODE in get_family(n).capabilities)


def given_options(args: argparse.Namespace) -> dict[str, str]:
    """{option name: value} of the family flags given on the command line (add_family_flags), as typed."""
    return {k[len(FAMILY_OPTION_DEST):]: v for k, v in vars(args).items()
            if k.startswith(FAMILY_OPTION_DEST) and v is not None}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kicktrain", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"kicktrain {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)

    families = ", ".join(cli_name(n) for n in family_names())

    sp = sub.add_parser("prepare", help="scan, decode and cache a folder of kicks (fit reuses the cache)")
    sp.add_argument("data", nargs="+")
    sp.add_argument("--family", default=cli_name(DEFAULT_CLI_FAMILY), help=f"model family: {families}")
    sp.add_argument("--preset", default="small")
    sp.add_argument("--set", action="append", metavar="data.KEY=VALUE", help="override a data setting")
    sp.add_argument("--cache", help="cache folder (default: the shared cache under ~/.cache/kicktrain)")
    sp.set_defaults(func=_cmd_prepare)

    from kickmodel.families import get_family

    sp = sub.add_parser("fit", help="train a model (resumes automatically from RUN)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="model families:\n" + "\n".join(f"  {get_family(n).cli_name:20} {get_family(n).summary}"
                                                           for n in family_names()))
    sp.add_argument("data", nargs="+")
    sp.add_argument("--run-dir", required=True)
    sp.add_argument("--family", help=f"model family: {families} (default: the --init artifact's, else "
                                     f"{cli_name(DEFAULT_CLI_FAMILY)})")
    sp.add_argument("--preset", help="tiny | small | base (default: the --init artifact's, else small)")
    sp.add_argument("--train-steps", "--max-steps", dest="train_steps", type=int, metavar="N",
                    help="training steps the run takes in all (train.max_steps; the preset's when left out); "
                         "--max-steps is its older name, still taken")
    sp.add_argument("--minutes", type=float, metavar="M",
                    help="time budget: once M minutes have passed since the start (set-up included), stop, checkpoint "
                         "and export as at the last step (re-run to go on)")
    sp.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    sp.add_argument("--export-dir", help="export the EMA model here after each checkpoint (e.g. the daemon's models): "
                                         "the weights of the step with the best validation loss so far")
    sp.add_argument("--export-name", help="artifact name in --export-dir (default: the run folder's name)")
    sp.add_argument("--init", help="fine-tune from this artifact (uses train.finetune_lr; 400 steps unless "
                                   "--train-steps says otherwise); a latent-diffusion artifact brings its VAE")
    sp.add_argument("--vram-budget", type=float, metavar="GB",
                    help="memory a training step may use: picks micro-batch, precision and checkpointing, fastest "
                         "first (default: the GPU's free memory; on a CPU, the plain loop)")
    sp.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override a config value")
    add_family_flags(sp, "fit")
    sp.add_argument("--cache", help="prepared-data cache folder (default: the shared cache kicktrain prepare uses)")
    sp.add_argument("--no-progress", action="store_true")
    sp.add_argument("--no-tensorboard", action="store_true")
    sp.set_defaults(func=_cmd_fit)

    sp = sub.add_parser("export", help="export a run's EMA weights as a served artifact")
    sp.add_argument("run")
    sp.add_argument("--out", required=True)
    sp.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                    help="what needs no retraining, by family: " + _export_keys_help())
    sp.add_argument("--map-data", nargs="+", metavar="KIT", help="the folders the run trained on: the artifact "
                    "stores the map of its training kicks among them (kicktrain map --into), for /kick/map and "
                    "/kick/near")
    add_family_flags(sp, "export")
    sp.set_defaults(func=_cmd_export)

    sp = sub.add_parser("sample", help="write kicks from an artifact, offline")
    sp.add_argument("artifact")
    sp.add_argument("--n", type=int, default=8)
    sp.add_argument("--out", required=True)
    sp.add_argument("--seed", type=int)
    sp.add_argument("--steps", type=int)
    sp.add_argument("--sampler")
    sp.add_argument("--device", default="auto")
    sp.add_argument("--control", action="append", metavar="NAME=VALUE", help="a control value 0..1, e.g. decay=0.8")
    sp.set_defaults(func=_cmd_sample)

    sp = sub.add_parser("eval", help="FAD/KID, novelty, diversity, haze against real kicks, one or several models",
                        description="Needs at least 4 real held-out kicks: --real a folder of kicks the model never "
                                    "trained on, or --real and --train the same folder, whose held-out split "
                                    "(data.val_fraction, 10 %%: 40 files or more) then gives them.")
    sp.add_argument("artifacts", nargs="+", metavar="ARTIFACT", help="one or several models, of any families")
    sp.add_argument("--real", required=True, help="folder of real (held-out) kicks: 4 or more")
    sp.add_argument("--train", help="folder of the training kicks (for novelty)")
    sp.add_argument("--out", default="eval", help="folder for report.json and PNGs")
    sp.add_argument("--n", type=int, default=64, help="generated kicks per setting")
    sp.add_argument("--steps", default="10,25,50", help="sampler steps to evaluate, comma separated")
    sp.add_argument("--sampler")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--embedding", default="mfcc-stats", help="embedding name or module:function")
    sp.add_argument("--device", default="auto")
    sp.add_argument("--run", help="run folder, for the loss curve")
    sp.set_defaults(func=_cmd_eval)

    sp = sub.add_parser("profile", help="training steps under torch.profiler: a trace and a summary")
    sp.add_argument("data", nargs="+")
    sp.add_argument("--out", required=True, help="folder for the trace (*.pt.trace.json) and summary.json")
    sp.add_argument("--family", default=cli_name(DEFAULT_CLI_FAMILY), help=f"model family: {families}")
    sp.add_argument("--preset", default="small")
    sp.add_argument("--steps", type=int, default=8, help="steps in all: 1 wait, 1 warm-up, the rest recorded "
                    "(the summary averages them)")
    sp.add_argument("--trace-steps", type=int, default=1, metavar="N",
                    help="recorded steps kept in the trace, the last N (default 1: a few MB a step on a CPU)")
    sp.add_argument("--detail", action="store_true",
                    help="record operator shapes and memory events in the trace (about 2.5x larger)")
    sp.add_argument("--device", default="auto")
    add_family_flags(sp, "profile")
    sp.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override a config value")
    sp.set_defaults(func=_cmd_profile)

    sp = sub.add_parser("map", help="a model's latent space as a picture (t-SNE and PCA) and a CSV")
    sp.add_argument("artifact", help=f"a model with an encoder ({_encoding_families()}), such as the bundled "
                    "kickserver/models/default.safetensors")
    sp.add_argument("data", nargs="+", help="folders (or files) of kicks to place on the map")
    sp.add_argument("--out", help="folder for map.png and map.csv")
    sp.add_argument("--into", metavar="ARTIFACT", help="store the map in the model, written to this artifact (it may "
                    "be ARTIFACT itself: written atomically); the daemon's /kick/map and /kick/near use it")
    sp.add_argument("--split", choices=("all", "train"), default="all",
                    help="train: only the kicks the model records as its training split (by name and content hash)")
    sp.add_argument("--perplexity", type=float, default=30.0, help="t-SNE perplexity (needs 3x+1 kicks)")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--device", default="cpu")
    sp.set_defaults(func=_cmd_map)
    return p


def main(argv: list[str] | None = None) -> int:
    from kickmodel.artifact import ArtifactError

    from .data import NoUsableAudio

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, ArtifactError, NoUsableAudio, FileNotFoundError, ValueError) as e:
        print(f"kicktrain {args.cmd}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except RuntimeError as e:
        from .train import TrainingError

        if isinstance(e, TrainingError) or "CUDA" in str(e):
            print(f"kicktrain {args.cmd}: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
