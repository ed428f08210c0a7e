"""`halucheck run --ray`: the same pipeline over a Ray cluster, for runs that outgrow one machine.

The driver (the `run` process) reads the input, brings the corpus index up to date and writes the reports,
as it does alone. In between, the answers with work left go out in shards of consecutive answers, one
Ray actor method call each: a worker keeps its engines across shards (HTTP clients of the configured
vLLM servers, or a model it loaded), runs claims, evidence and verdicts for its shard in a run database of
the shard's own, seeded by the driver with the shard's work stored so far, and sends that database back;
the driver merges it into the run's in one transaction. So:

- a worker killed mid-shard: Ray starts the actor again and calls it again (``max_task_retries``); on the
  same machine it reopens the shard's database with its reply cache, so replies kept are not asked again;
  the run's database holds a shard only once it is merged whole, and a merge replaces the shard's rows;
- the driver killed: the same command sends out only the answers with work left (finished shards are
  merged), and a shard database left behind on this machine is resumed with its replies.

The corpus index is built once by the driver and put in Ray's object store; a worker opens the driver's
file where it can see it unchanged, else the copy it fetches. Ray is imported here only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from halucheck.config import SHARD_ANSWERS
from halucheck.errors import ConfigError, HalucheckError
from halucheck.ingest import file_sha256

if TYPE_CHECKING:
    from halucheck.config import RunOptions, Settings
    from halucheck.inputs import Item
    from halucheck.pipeline import Pipeline

LOCAL_OBJECT_STORE = 512 * 2**20  # bytes of Ray's object store for a local cluster (its default takes 30 % of RAM)
INSTALL = "pip install 'halucheck[ray]'"


@dataclass(frozen=True)
class ClusterOptions:
    """Where and how wide a distributed run goes."""

    address: str | None = None  # a running cluster (`ray start --head` prints it); None: a local one
    workers: int | None = None  # actors; None: one per CPU of the cluster
    shard_answers: int = SHARD_ANSWERS
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0  # for a worker that loads a model itself (an embedded engine)


@dataclass(frozen=True)
class IndexCopy:
    """The run's corpus index as the driver built it: its path there, its digest, and the same bytes in
    Ray's object store (in a list, so Ray hands a worker the reference, fetched only when needed)."""

    path: str
    sha256: str
    ref: list


def _ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--ray needs Ray, which is not installed; install it with: {INSTALL}") from None
    return ray


def check_installed() -> None:
    """Before anything is opened: Ray is there, or the one line that says how to install it."""
    _ray()


def shards_of(items: list[int], size: int) -> list[tuple[int, ...]]:
    """``items`` (indexes with work left) grouped by the fixed blocks ``[k*size, (k+1)*size)`` they fall in:
    a shard is named by its block, the same in every run of this input, so a shard's database left by a
    killed run is found again."""
    blocks: dict[int, list[int]] = {}
    for i in items:
        blocks.setdefault(i // size, []).append(i)
    return [tuple(v) for _, v in sorted(blocks.items())]


def shard_name(shard: tuple[int, ...], size: int) -> str:
    start = shard[0] // size * size
    return f"{start:08d}-{start + size - 1:08d}"


class ShardWorker:
    """A Ray actor: runs shards of one run, keeping its engines from one shard to the next."""

    def __init__(self, opts: RunOptions, settings: Settings, index: IndexCopy | None) -> None:
        self.opts, self.settings, self.index = opts, settings, index
        self.engines: dict = {}  # loaded once, used for every shard
        self._index_path: Path | None = None
        self._evidence = None

    def index_path(self) -> Path | None:
        """The corpus index this worker reads: the driver's file if this machine sees it unchanged,
        else its copy from the object store (fetched once per machine)."""
        if self.index is None:
            return None
        if self._index_path is None:
            own = Path(self.index.path)
            if own.is_file() and file_sha256(own) == self.index.sha256:
                self._index_path = own
            else:
                import ray

                copy = Path(tempfile.gettempdir()) / "halucheck-ray" / f"index-{self.index.sha256[:16]}.duckdb"
                if not copy.is_file():
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    part = copy.with_suffix(f".{os.getpid()}.part")
                    part.write_bytes(ray.get(self.index.ref[0]))
                    part.replace(copy)
                self._index_path = copy
        return self._index_path

    def run(self, name: str, items: list[tuple[int, Item]], seed: bytes) -> tuple[str, bytes]:
        """Work of one shard; returns its name and its run database. ``seed``: the database the driver
        made for it, used unless this machine already holds the shard's (a retry, or a resumed run)."""
        from halucheck.pipeline import Pipeline

        folder = Path(self.opts.out) / "shards" / name
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:  # a machine without the driver's folder: a scratch folder of its own
            tag = hashlib.sha256(str(self.opts.out).encode()).hexdigest()[:12]
            folder = Path(tempfile.gettempdir()) / "halucheck-ray" / tag / name
            folder.mkdir(parents=True, exist_ok=True)
        db = folder / "run.duckdb"
        if not db.is_file():
            part = folder / "seed.part"
            part.write_bytes(seed)
            part.replace(db)
        log = lambda m: print(m, file=sys.stderr)  # noqa: E731 - Ray shows a worker's stderr on the driver
        if self._evidence is None:  # the index opened once: its BM25 and dense matrices load on first search
            from halucheck.evidence import EvidenceSources

            self._evidence = EvidenceSources(self.opts.corpus, self.index_path(), self.opts.top_k,
                                             self.opts.use_context, log, built=True)
        pipe = Pipeline(replace(self.opts, out=folder), self.settings, log=log, engines=self.engines,
                        evidence=self._evidence)
        try:
            pipe.process(items)
        finally:
            pipe.close()
        return name, db.read_bytes()


def process(pipe: Pipeline, items: list[tuple[int, Item]], cluster: ClusterOptions) -> None:
    """``Pipeline.run``'s work step on a Ray cluster (see the module's docstring)."""
    ray = _ray()
    todo = set(pipe.store.items_with_work())
    shards = shards_of([i for i, _ in items if i in todo], cluster.shard_answers)
    if not shards:
        return
    by_idx = dict(items)
    opts = replace(pipe.opts, **{k: Path(v).resolve() for k in ("input", "out", "corpus", "index", "bibliography")
                                 if (v := getattr(pipe.opts, k)) is not None and str(v) != "-"})
    corpus = pipe.evidence.corpus() if pipe.opts.corpus is not None else None
    index_file = Path(corpus.db) if corpus is not None else None
    pipe.evidence.close()  # the workers open it read-only
    started = not ray.is_initialized()
    if started:
        _start(ray, cluster.address)
    try:
        index = None
        if index_file is not None:
            index = IndexCopy(str(index_file.resolve()), file_sha256(index_file), [ray.put(index_file.read_bytes())])
        n = cluster.workers or max(1, int(ray.cluster_resources().get("CPU", 1) // cluster.cpus_per_worker))
        actor = ray.remote(ShardWorker).options(
            num_cpus=cluster.cpus_per_worker, num_gpus=cluster.gpus_per_worker,
            max_restarts=-1, max_task_retries=3)
        workers = [actor.remote(opts, pipe.settings, index) for _ in range(min(n, len(shards)))]
        from ray.util import ActorPool

        pool = ActorPool(workers)
        merge_dir = opts.out / "shards"
        merge_dir.mkdir(parents=True, exist_ok=True)
        shard_items = {shard_name(s, cluster.shard_answers): s for s in shards}

        def send(worker, name: str):
            """A shard's seed is made when a worker is free for it (ActorPool calls this then), so the
            driver holds one seed at a time, not one per shard."""
            seed = merge_dir / f"{name}.seed.duckdb"
            pipe.store.write_shard(seed, shard_items[name])
            data = seed.read_bytes()
            seed.unlink()
            return worker.run.remote(name, [(i, by_idx[i]) for i in shard_items[name]], data)

        for name in shard_items:
            pool.submit(send, name)
        bar = pipe.progress(total=sum(map(len, shards)), desc="shards   ", unit="answer")
        done = 0
        while pool.has_next():
            try:
                name, data = pool.get_next_unordered()
            except ray.exceptions.RayError as exc:
                raise HalucheckError(f"a Ray worker failed past its retries: {str(exc).splitlines()[0]}; nothing "
                                     "merged so far is lost: run the same command again") from None
            merged = merge_dir / f"{name}.merge.duckdb"
            merged.write_bytes(data)
            pipe.store.merge_shard(merged, shard_items[name])
            merged.unlink()
            shutil.rmtree(merge_dir / name, ignore_errors=True)  # this machine's copy, if the worker ran here
            done += 1
            bar.update(len(shard_items[name]))
            pipe.log(f"shard {name}: {len(shard_items[name])} answer(s) merged ({done} of {len(shards)} shards)")
        bar.close()
    finally:
        if started:
            ray.shutdown()


def _start(ray, address: str | None) -> None:
    """Join the cluster at ``address``, or start a local one with a capped object store."""
    # the workers read the same configuration: HALUCHECK_* variables (models.yaml, embedding model, ...)
    from halucheck.config import env, env_for_workers

    runtime = {"env_vars": {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"), **env_for_workers()}}
    if address:
        ray.init(address=address, runtime_env=runtime, log_to_driver=True)
    else:
        ray.init(object_store_memory=int(env("HALUCHECK_RAY_OBJECT_STORE") or LOCAL_OBJECT_STORE),
                 include_dashboard=False, runtime_env=runtime, log_to_driver=True)


__all__ = ["ClusterOptions", "ShardWorker", "check_installed", "process", "shard_name", "shards_of"]
