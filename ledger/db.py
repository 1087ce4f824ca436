"""The ledger's storage: one SQLite file per workspace, or one PostgreSQL database for a team, behind one class.

:class:`Ledger` is the whole interface; the two backends differ only in how they connect, lock and search text:

* **SQLite** (the default, no server): ``<workspace>/ledger.sqlite3`` in WAL mode. A write is one ``BEGIN
  IMMEDIATE`` transaction (writers queue on the file lock for up to :data:`BUSY_TIMEOUT_S`; readers never wait and
  see the last committed state). Text search is an FTS5 table with the porter stemmer.
* **PostgreSQL** (``KWIKI_LEDGER_URL``, psycopg 3): a write is one transaction that first takes an advisory lock on
  the candidate's key (and on its task when it picks the next automatic id), so writers of different candidates
  run in parallel. Text search is a ``tsvector`` column with a GIN index.

Both keep the newest version of each candidate in ``candidates`` (``UNIQUE (task, id)``; ``key`` = ``task/id``),
every version in ``candidate_versions`` (append-only, ``PRIMARY KEY (key, version)``), the pages each applies in
``candidate_pages``, lines an import could not read in ``problems`` (with their raw text). The schema is versioned:
``schema_version`` lists the applied :data:`MIGRATIONS`, each applied once, in order, under a lock.

A workspace of the JSONL era (``candidates.jsonl`` + ``benchmark.csv``) is imported on the first write, in the
transaction that creates the database: every version of every candidate, the benchmark rows merged into their
candidate, and the lines that could not be read (kept with their text). The old files are left as they were. Until
that first write a read never touches the folder: it reads an in-memory import of the files.

    >>> import tempfile
    >>> from kwiki.ledger import Candidate, Ledger
    >>> led = Ledger(Path(tempfile.mkdtemp()))
    >>> _ = led.append(Candidate(id="t01", task="transpose", mechanism="stage a 32x32 tile in shared memory"))
    >>> _ = led.append(Candidate(id="t02", task="transpose", parent="t01", mechanism="pad the tile to 33 columns"))
    >>> [c.id for c in led.ancestors("transpose/t02")], [c.id for c in led.descendants("t01")]
    (['t01'], ['t02'])
    >>> led.search("padding the tile")[0][0].key
    'transpose/t02'
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence
from urllib.parse import urlsplit, urlunsplit

from filelock import FileLock, Timeout

from kwiki.errors import BadRequest, LedgerUnavailable, NotFound

from .pages import candidate_title, render_body
from .store import MAX_RECORD_BYTES, STATUSES, Candidate, JsonlWorkspace, LedgerRead, LineProblem, bare_page_id, nearest, now_iso

if TYPE_CHECKING:
    import psycopg

DB_FILE = "ledger.sqlite3"
#: A SQLite writer waits this long for another process's transaction before it fails: 20 writers of ~1 ms each
#: queue for milliseconds, so 30 s only runs out when a process holds the file locked (a debugger, a stuck disk).
BUSY_TIMEOUT_S = 30.0
#: PostgreSQL connect timeout: an unreachable server is an error within seconds, not a hung command.
CONNECT_TIMEOUT_S = 10
#: Rows the text search fetches before the status/tag/architecture filters; the tier shows at most 50.
SEARCH_POOL = 200
#: Query words used by the text search: a pasted report still searches, without a query of thousands of terms.
MAX_QUERY_TERMS = 64
_WORD = re.compile(r"[A-Za-z0-9_]+")
_AUTO_ID = re.compile(r"c[0-9]{3,}")
#: Words the text search leaves out on both backends (PostgreSQL's english configuration drops them itself; FTS5 has
#: no stop list, and under OR a "the" or "in" lets any candidate match).
STOP_WORDS = frozenset("a an and are as at be but by for from has have i in is it its my of on or so that the this to "
                       "was were what when where which while who why will with".split())


@dataclass(frozen=True)
class Migration:
    """One step of the schema: its SQL per dialect, and an optional data step run after it in the same transaction."""

    version: int
    description: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]
    data: Callable[["Tx"], None] | None = None


def _reindex_all(tx: "Tx") -> None:
    for (record,) in tx.rows("SELECT record FROM candidates ORDER BY seq"):
        _index_text(tx, _candidate(record))


_TABLES = (
    """CREATE TABLE candidates (
        seq {serial},
        key TEXT NOT NULL UNIQUE,
        task TEXT NOT NULL,
        id TEXT NOT NULL,
        parent_key TEXT,
        kernel TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL CHECK (status IN ('candidate', 'promoted', 'rejected')),
        mechanism TEXT NOT NULL DEFAULT '',
        reason TEXT NOT NULL DEFAULT '',
        version INTEGER NOT NULL,
        created_at TEXT,
        updated_at TEXT,
        record TEXT NOT NULL,
        UNIQUE (task, id))""",
    "CREATE INDEX candidates_parent ON candidates (parent_key)",
    "CREATE INDEX candidates_kernel_status ON candidates (kernel, status)",
    """CREATE TABLE candidate_versions (
        key TEXT NOT NULL, version INTEGER NOT NULL, record TEXT NOT NULL, written_at TEXT NOT NULL,
        PRIMARY KEY (key, version))""",
    "CREATE TABLE candidate_pages (key TEXT NOT NULL, page TEXT NOT NULL, PRIMARY KEY (key, page))",
    "CREATE INDEX candidate_pages_page ON candidate_pages (page)",
    "CREATE TABLE problems (seq {serial}, file TEXT NOT NULL, line INTEGER NOT NULL, reason TEXT NOT NULL, raw TEXT NOT NULL)",
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
)

#: The schema, in order; a database records each version it has applied in ``schema_version``.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "candidates (newest version), every version, applied pages, import problems, meta",
              sqlite=tuple(t.format(serial="INTEGER PRIMARY KEY AUTOINCREMENT") for t in _TABLES),
              postgres=tuple(t.format(serial="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY") for t in _TABLES)),
    Migration(2, "full-text search over each candidate's title and rendered page",
              sqlite=("CREATE VIRTUAL TABLE candidates_fts USING fts5(key UNINDEXED, title, body, tokenize='porter unicode61')",),
              postgres=("ALTER TABLE candidates ADD COLUMN tsv tsvector",
                        "CREATE INDEX candidates_tsv ON candidates USING GIN (tsv)"),
              data=_reindex_all),
)
#: The schema version this kwiki writes; a database of a newer one is refused (upgrade kwiki first).
SCHEMA_VERSION = MIGRATIONS[-1].version


class Tx:
    """One open transaction: ``rows``/``one``/``run`` take SQL with ``?`` placeholders on either backend."""

    def __init__(self, conn: Any, dialect: str) -> None:
        self.conn = conn
        self.dialect = dialect

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgres" else sql

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(self._sql(sql), tuple(params))
        return list(cur.fetchall()) if cur.description else []

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.conn.execute(self._sql(sql), tuple(params))

    def lock(self, name: str) -> None:
        """Serialize writers on ``name`` until the transaction ends (PostgreSQL; SQLite's writers are serial already)."""
        if self.dialect == "postgres":
            self.run("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (name,))


def _migrate(tx: Tx, on_create: Callable[[Tx], None] | None = None) -> int:
    """Apply the missing migrations in order (the caller holds the write lock); returns the version found."""
    tx.run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)")
    found = tx.one("SELECT max(version) FROM schema_version")
    have = int(found[0]) if found and found[0] is not None else 0
    if have > SCHEMA_VERSION:
        raise LedgerUnavailable(f"the ledger's schema is version {have}, newer than this kwiki's {SCHEMA_VERSION}",
                                hint="upgrade kwiki on this machine (pip install -U kwiki) before using this ledger")
    for m in MIGRATIONS:
        if m.version > have:
            for sql in (m.sqlite if tx.dialect == "sqlite" else m.postgres):
                tx.run(sql)
            if m.data is not None:
                m.data(tx)
            tx.run("INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                   (m.version, m.description, now_iso()))
    if have == 0 and on_create is not None:
        on_create(tx)
    return have


# ---------------------------------------------------------------------------------------------- backends
class _SQLite:
    dialect = "sqlite"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / DB_FILE
        self.legacy = JsonlWorkspace(self.root)
        self._ready = False
        self._memory: tuple[tuple[int, ...], sqlite3.Connection] | None = None
        self._memory_lock = threading.Lock()

    def _connect(self, target: str | Path) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"cannot open the ledger file {self.path}: {exc}", hint="check the folder's permissions") from None
        return conn

    def _import_legacy(self, tx: Tx) -> None:
        if self.legacy.exists():
            import_jsonl(tx, self.legacy)

    def _prepare(self, conn: sqlite3.Connection) -> None:
        try:  # up to date: nothing to lock (a reader must not queue behind writers for this)
            found = conn.execute("SELECT max(version) FROM schema_version").fetchone()
            if found and found[0] is not None and int(found[0]) == SCHEMA_VERSION:
                return
        except sqlite3.OperationalError:  # no schema_version yet: a new file
            pass
        # a new or older file: one process at a time switches it to WAL and migrates it. Processes that open a new
        # file at once otherwise race on the journal-mode switch, for which SQLite may answer "database is locked"
        # without waiting (its busy handler is skipped where waiting could deadlock).
        try:
            held = FileLock(self.path.with_name(self.path.name + ".lock"), timeout=BUSY_TIMEOUT_S).acquire()
        except Timeout:
            raise LedgerUnavailable(f"the ledger file {self.path} is being prepared by another process for over "
                                    f"{BUSY_TIMEOUT_S:.0f} s", hint="another process holds it locked") from None
        with held:  # released on leaving
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")  # readers see the last commit while a writer writes (persistent)
            conn.execute("BEGIN IMMEDIATE")
            try:
                _migrate(Tx(conn, "sqlite"), self._import_legacy)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _in_memory(self) -> sqlite3.Connection:
        """The JSONL files (or nothing) imported into memory, kept while the files do not change."""
        stamp = self.legacy.stamp()
        if self._memory is None or self._memory[0] != stamp:
            conn = self._connect(":memory:")
            conn.execute("BEGIN")
            _migrate(Tx(conn, "sqlite"), self._import_legacy)
            conn.execute("COMMIT")
            self._memory = (stamp, conn)
        return self._memory[1]

    @contextmanager
    def tx(self, write: bool) -> Iterator[Tx]:
        if not write and not self.path.exists():  # reading never creates or changes the workspace
            with self._memory_lock:
                yield Tx(self._in_memory(), "sqlite")
            return
        if write:
            self.root.mkdir(parents=True, exist_ok=True)
        conn = self._connect(self.path)
        try:
            conn.execute("PRAGMA synchronous=FULL")  # a commit is on disk when append returns
            if not self._ready:
                self._prepare(conn)
                self._ready = True
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield Tx(conn, "sqlite")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            raise LedgerUnavailable(f"the ledger file {self.path} is unavailable: {exc}",
                                    hint="another process holds it locked, or the disk is full or read-only") from None
        finally:
            conn.close()

    def location(self) -> str:
        return str(self.path)

    def name(self) -> str:
        return self.root.name


class _Postgres:
    dialect = "postgres"
    #: advisory lock id under which a process applies migrations (any constant unique to kwiki)
    MIGRATION_LOCK = "kwiki-ledger-migrations"

    def __init__(self, url: str) -> None:
        self.url = url
        self._local = threading.local()
        self._ready = False

    def _conn(self) -> "psycopg.Connection[Any]":
        import psycopg

        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            try:
                conn = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
            except psycopg.Error as exc:
                raise LedgerUnavailable(f"cannot reach the ledger database {self.location()}: {str(exc).strip()[:300]}",
                                        hint="check KWIKI_LEDGER_URL and that the server is up") from None
            self._local.conn = conn
        return conn

    def _migrated(self) -> "psycopg.Connection[Any]":
        conn = self._conn()
        if not self._ready:
            with conn.transaction():
                t = Tx(conn, "postgres")
                t.lock(self.MIGRATION_LOCK)
                _migrate(t)
            self._ready = True
        return conn

    @contextmanager
    def tx(self, write: bool) -> Iterator[Tx]:
        import psycopg

        conn: psycopg.Connection[Any] | None = None
        try:
            stack = ExitStack()
            for attempt in (1, 2):
                conn = self._migrated()
                try:
                    stack.enter_context(conn.transaction())  # BEGIN
                    break
                except psycopg.OperationalError:
                    # a connection the server dropped since its last use (a restart, an idle timeout) is replaced
                    # once, before anything of this transaction ran
                    conn.close()
                    if attempt == 2:
                        raise
            with stack:
                yield Tx(conn, "postgres")
        except psycopg.OperationalError as exc:
            if conn is not None:
                conn.close()  # the next call reconnects
            raise LedgerUnavailable(f"the ledger database {self.location()} failed: {str(exc).strip()[:300]}",
                                    hint="retry; check that the server is up") from None

    def location(self) -> str:
        """The URL without its password."""
        parts = urlsplit(self.url)
        netloc = parts.netloc
        if "@" in netloc:
            user, host = netloc.rsplit("@", 1)
            netloc = f"{user.split(':', 1)[0]}@{host}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def name(self) -> str:
        return "postgresql:" + (urlsplit(self.url).path.lstrip("/") or "default")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()


# ---------------------------------------------------------------------------------------------- writes
def _candidate(record: str) -> Candidate:
    return Candidate.model_validate_json(record)


def _index_text(tx: Tx, cand: Candidate) -> None:
    title, body = candidate_title(cand), render_body(cand) + " " + " ".join([cand.kernel, *cand.techniques, *cand.patterns])
    if tx.dialect == "sqlite":
        tx.run("DELETE FROM candidates_fts WHERE key = ?", (cand.key,))
        tx.run("INSERT INTO candidates_fts (key, title, body) VALUES (?, ?, ?)", (cand.key, title, body))
    else:
        tx.run("UPDATE candidates SET tsv = setweight(to_tsvector('english', ?), 'A') || setweight(to_tsvector('english', ?), 'B') "
               "WHERE key = ?", (title, body, cand.key))


def _next_id(tx: Tx, task: str) -> str:
    taken = {row[0] for row in tx.rows("SELECT id FROM candidates WHERE task = ?", (task,))}
    n = sum(1 for t in taken if _AUTO_ID.fullmatch(t)) + 1  # past the automatic ones (the first free is found below)
    while f"c{n:03d}" in taken:
        n += 1
    return f"c{n:03d}"


def _write(tx: Tx, cand: Candidate, stamp: str | None, auto_id: bool = False) -> Candidate:
    """Write one version of ``cand`` in the open transaction. ``stamp`` None keeps the record's own times (import)."""
    while True:
        if auto_id:
            tx.lock(f"kwiki-ledger-task:{cand.task}")
            cand = cand.model_copy(update={"id": _next_id(tx, cand.task)})
        tx.lock(f"kwiki-ledger-key:{cand.key}")
        row = tx.one("SELECT version, created_at FROM candidates WHERE key = ?", (cand.key,))
        if not (auto_id and row):
            break  # an explicit id written meanwhile by another writer took that number: pick the next one
    update: dict[str, Any] = {}
    if stamp is not None:
        update["updated_at"] = stamp
        if cand.created_at is None:
            update["created_at"] = (row[1] if row and row[1] else stamp)
    final = cand.model_copy(update=update) if update else cand
    record = final.model_dump_json(exclude_none=True)
    if len(record.encode("utf-8")) > MAX_RECORD_BYTES:
        raise BadRequest(f"candidate record is {len(record.encode('utf-8'))} bytes, over {MAX_RECORD_BYTES}",
                         hint="keep reports as files and list their paths in evidence.reports")
    version = int(row[0]) + 1 if row else 1
    cols = (final.task, final.id, final.parent_key, final.kernel, final.status, final.mechanism, final.reason, version,
            final.created_at, final.updated_at, record)
    if row:
        tx.run("UPDATE candidates SET task = ?, id = ?, parent_key = ?, kernel = ?, status = ?, mechanism = ?, reason = ?, "
               "version = ?, created_at = ?, updated_at = ?, record = ? WHERE key = ?", (*cols, final.key))
    else:
        tx.run("INSERT INTO candidates (task, id, parent_key, kernel, status, mechanism, reason, version, created_at, "
               "updated_at, record, key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (*cols, final.key))
    tx.run("INSERT INTO candidate_versions (key, version, record, written_at) VALUES (?, ?, ?, ?)",
           (final.key, version, record, stamp or now_iso()))
    tx.run("DELETE FROM candidate_pages WHERE key = ?", (final.key,))
    for page in dict.fromkeys(bare_page_id(p) for p in final.applies()):
        tx.run("INSERT INTO candidate_pages (key, page) VALUES (?, ?)", (final.key, page))
    _index_text(tx, final)
    return final


def import_jsonl(tx: Tx, ws: JsonlWorkspace) -> dict[str, Any]:
    """Import a JSONL-era workspace in the open transaction, losing nothing: each valid line as a version (the
    benchmark rows merged into the newest), each unreadable line or row into ``problems`` with its text."""
    versions: list[Candidate] = []
    raw: list[str] = []
    read = ws.read(versions=versions, raw_problems=raw)
    for cand in versions:
        _write(tx, cand, stamp=None)
    for problem, text in zip(read.problems, raw + [""] * (len(read.problems) - len(raw))):
        tx.run("INSERT INTO problems (file, line, reason, raw) VALUES (?, ?, ?, ?)",
               (problem.file, problem.line, problem.reason, text))
    digest = hashlib.sha256()
    for path in (ws.candidates_path, ws.benchmark_path):
        if path.is_file():
            digest.update(path.read_bytes())
    info = {"from": [p.name for p in (ws.candidates_path, ws.benchmark_path) if p.is_file()], "lines": read.lines,
            "versions": len(versions), "candidates": len(read.candidates), "problems": len(read.problems),
            "sha256": digest.hexdigest(), "at": now_iso()}
    tx.run("INSERT INTO meta (name, value) VALUES (?, ?)", ("imported_jsonl", json.dumps(info)))
    return info


# ---------------------------------------------------------------------------------------------- the ledger
class Ledger:
    """A ledger: a workspace folder (its SQLite file) or, with ``url``, a PostgreSQL database. Creating the object
    touches nothing; reading never creates anything; the first write creates the file (or the tables)."""

    def __init__(self, root: Path | None = None, *, url: str | None = None) -> None:
        if (root is None) == (url is None):
            raise ValueError("a Ledger is a workspace folder or a PostgreSQL URL, one of the two")
        self.root: Path | None = Path(root) if root is not None else None
        self.url = url
        self._backend: _SQLite | _Postgres = _SQLite(Path(root)) if root is not None else _Postgres(str(url))

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgres``."""
        return self._backend.dialect

    @property
    def location(self) -> str:
        """Where it lives: the SQLite file's path, or the database URL without its password."""
        return self._backend.location()

    @property
    def name(self) -> str:
        """A short name that shows no server path (the workspace folder's name, or ``postgresql:DBNAME``)."""
        return self._backend.name()

    def __repr__(self) -> str:
        return f"Ledger({self.location!r})"

    def close(self) -> None:
        if isinstance(self._backend, _Postgres):
            self._backend.close()

    # ------------------------------------------------------------ writing
    def append(self, cand: Candidate, *, auto_id: bool = False) -> Candidate:
        """Write one candidate (a new one, or a new version of one: same task and id) in one transaction; stamps
        ``created_at`` (when absent) and ``updated_at``. With ``auto_id`` the id becomes the task's next free ``cNNN``,
        chosen under the lock, so two writers never get the same one. Returns what was written."""
        with self._backend.tx(write=True) as tx:
            return _write(tx, cand, now_iso(), auto_id=auto_id)

    def append_many(self, cands: Sequence[Candidate]) -> list[Candidate]:
        """Write several candidates in one transaction: all of them, or (on an error) none."""
        stamp = now_iso()
        with self._backend.tx(write=True) as tx:
            return [_write(tx, c, stamp) for c in cands]

    def migrate(self) -> dict[str, Any]:
        """Create or upgrade the schema now (and import a JSONL workspace, as a first write would); returns
        ``{"location", "schema_version", "migrations", "imported_jsonl"}`` (the import's counts, or None)."""
        with self._backend.tx(write=True) as tx:
            applied = tx.rows("SELECT version, description, applied_at FROM schema_version ORDER BY version")
            info = tx.one("SELECT value FROM meta WHERE name = ?", ("imported_jsonl",))
        return {"location": self.location, "schema_version": int(applied[-1][0]) if applied else 0,
                "migrations": [{"version": int(v), "description": d, "applied_at": t} for v, d, t in applied],
                "imported_jsonl": json.loads(info[0]) if info else None}

    # ------------------------------------------------------------ reading
    def exists(self) -> bool:
        """Has anything been recorded (or is there a JSONL workspace to import)?"""
        return self.count() > 0 or bool(self.problems())

    def count(self) -> int:
        with self._backend.tx(write=False) as tx:
            row = tx.one("SELECT count(*) FROM candidates")
        return int(row[0]) if row else 0

    def problems(self) -> list[LineProblem]:
        """Lines of an imported JSONL workspace that could not be read (their text is kept in the database)."""
        with self._backend.tx(write=False) as tx:
            rows = tx.rows("SELECT file, line, reason FROM problems ORDER BY seq")
        return [LineProblem(file=f, line=n, reason=r) for f, n, r in rows]

    def read(self, task: str | None = None, status: str | None = None, kernel: str | None = None) -> LedgerRead:
        """The newest version of every candidate (first-recorded first), filtered in SQL, and the import problems."""
        if status and status not in STATUSES:
            raise BadRequest(f"unknown status '{status}'", hint=f"one of: {', '.join(STATUSES)}")
        where, params = _where(task=task, status=status, kernel=kernel)
        with self._backend.tx(write=False) as tx:
            rows = tx.rows(f"SELECT record FROM candidates{where} ORDER BY seq", params)
            probs = tx.rows("SELECT file, line, reason FROM problems ORDER BY seq")
            versions = tx.one("SELECT count(*) FROM candidate_versions")
        return LedgerRead(candidates=[_candidate(r[0]) for r in rows],
                          problems=[LineProblem(file=f, line=n, reason=r) for f, n, r in probs],
                          lines=int(versions[0]) if versions else 0)

    def _resolve(self, tx: Tx, ref: str) -> str:
        ref = ref.strip()
        if tx.one("SELECT 1 FROM candidates WHERE key = ?", (ref,)):
            return ref
        found = [r[0] for r in tx.rows("SELECT key FROM candidates WHERE id = ? ORDER BY seq", (ref,))]
        if len(found) > 1:
            raise BadRequest(f"candidate id '{ref[:120]}' is in several tasks: {', '.join(k.split('/')[0] for k in found)}",
                             hint=f"use task/id, e.g. {found[0]}")
        if not found:
            keys = [r[0] for r in tx.rows("SELECT key FROM candidates")]
            close = nearest(ref, keys)
            raise NotFound(f"no candidate '{ref[:120]}'", hint=(f"nearest: {', '.join(close)}; " if close else "")
                           + "`kwiki ledger list` shows the ids (task/id)")
        return found[0]

    def get(self, ref: str) -> Candidate:
        """``task/id``, or a bare ``id`` when only one task has it; unknown: NotFound naming the nearest ids."""
        with self._backend.tx(write=False) as tx:
            row = tx.one("SELECT record FROM candidates WHERE key = ?", (self._resolve(tx, ref),))
        assert row is not None
        return _candidate(row[0])

    def find(self, key: str) -> Candidate | None:
        """The candidate of exactly this ``task/id`` key, or None."""
        with self._backend.tx(write=False) as tx:
            row = tx.one("SELECT record FROM candidates WHERE key = ?", (key,))
        return _candidate(row[0]) if row else None

    def keys(self, task: str | None = None) -> list[str]:
        where, params = _where(task=task)
        with self._backend.tx(write=False) as tx:
            return [r[0] for r in tx.rows(f"SELECT key FROM candidates{where} ORDER BY seq", params)]

    def versions(self, ref: str) -> list[Candidate]:
        """Every version of a candidate, oldest first."""
        with self._backend.tx(write=False) as tx:
            rows = tx.rows("SELECT record FROM candidate_versions WHERE key = ? ORDER BY version", (self._resolve(tx, ref),))
        return [_candidate(r[0]) for r in rows]

    def next_id(self, task: str) -> str:
        """``c001``, ``c002``, ...: the next free id of that form in ``task`` (what ``auto_id`` would pick now)."""
        with self._backend.tx(write=False) as tx:
            return _next_id(tx, task)

    # ------------------------------------------------------------ lineage (recursive SQL)
    def ancestors(self, ref: str) -> list[Candidate]:
        """The candidate's ancestors, root first (its parent last); a missing parent ends the chain, a cycle is cut."""
        with self._backend.tx(write=False) as tx:
            key = self._resolve(tx, ref)
            rows = tx.rows(
                "WITH RECURSIVE up(key, parent_key) AS ("
                " SELECT key, parent_key FROM candidates WHERE key = ?"
                " UNION SELECT c.key, c.parent_key FROM candidates c JOIN up ON c.key = up.parent_key)"
                " SELECT c.key, c.record FROM candidates c JOIN up ON c.key = up.key", (key,))
        by_key = {k: _candidate(r) for k, r in rows}
        chain: list[Candidate] = []
        cur = by_key[key].parent_key
        while cur in by_key and cur != key and all(c.key != cur for c in chain):
            chain.append(by_key[cur])
            cur = by_key[cur].parent_key
        return chain[::-1]

    def descendants(self, ref: str) -> list[Candidate]:
        """Every candidate derived from this one, at any depth, in the order they were recorded."""
        with self._backend.tx(write=False) as tx:
            key = self._resolve(tx, ref)
            rows = tx.rows(
                "WITH RECURSIVE down(key) AS ("
                " SELECT key FROM candidates WHERE parent_key = ?"
                " UNION SELECT c.key FROM candidates c JOIN down ON c.parent_key = down.key)"
                " SELECT c.record FROM candidates c JOIN down ON c.key = down.key WHERE c.key <> ? ORDER BY c.seq", (key, key))
        return [_candidate(r[0]) for r in rows]

    def attempts(self, kernel: str | None = None, technique: str | None = None, mechanism: str | None = None,
                 status: str | None = "rejected", task: str | None = None) -> list[Candidate]:
        """Attempts (by default the rejected ones) on a kernel: of a technique or pattern page id, and/or whose text
        has every word of ``mechanism``; in the order they were recorded."""
        if status and status not in STATUSES:
            raise BadRequest(f"unknown status '{status}'", hint=f"one of: {', '.join(STATUSES)}")
        where, params = _where(task=task, status=status, kernel=kernel, alias="c.")
        clauses = [where] if where else []
        if technique:
            clauses.append("c.key IN (SELECT key FROM candidate_pages WHERE page = ?)")
            params.append(bare_page_id(technique.strip()))
        terms = _terms(mechanism or "")
        if mechanism and not terms:
            return []
        with self._backend.tx(write=False) as tx:
            if terms:
                sql, qparam = _text_match(tx.dialect, terms, " AND ")
                clauses.append(sql)
                params.append(qparam)
            cond = " AND ".join(c.removeprefix(" WHERE ") for c in clauses)
            rows = tx.rows("SELECT c.record FROM candidates c" + (f" WHERE {cond}" if cond else "") + " ORDER BY c.seq", params)
        return [_candidate(r[0]) for r in rows]

    def applying(self, page_ids: set[str]) -> list[Candidate]:
        """Candidates that applied (technique) or addressed (pattern) one of ``page_ids``, in recorded order."""
        bare = sorted({bare_page_id(p) for p in page_ids if p})
        if not bare:
            return []
        marks = ", ".join("?" for _ in bare)
        with self._backend.tx(write=False) as tx:
            rows = tx.rows(f"SELECT record FROM candidates WHERE key IN (SELECT key FROM candidate_pages WHERE page IN ({marks})) "
                           "ORDER BY seq", bare)
        return [_candidate(r[0]) for r in rows]

    # ------------------------------------------------------------ retrieval
    def search(self, query: str, k: int = 10, status: str | None = None,
               keep: Callable[[Candidate], bool] | None = None) -> list[tuple[Candidate, float]]:
        """Candidates ranked by full-text relevance to ``query`` (any of its words; SQLite: BM25 over FTS5, title x3;
        PostgreSQL: ``ts_rank`` over the weighted ``tsvector``), with their score (higher is better, per backend).
        ``keep`` filters the ranked rows (the search filters a tier applies)."""
        if status and status not in STATUSES:
            raise BadRequest(f"unknown status '{status}'", hint=f"one of: {', '.join(STATUSES)}")
        terms = _terms(query)
        if not terms:
            return []
        with self._backend.tx(write=False) as tx:
            cond, qparam = _text_match(tx.dialect, terms, " OR ")
            params: list[Any] = [qparam]
            extra = ""
            if status:
                extra, params = " AND c.status = ?", [qparam, status]
            if tx.dialect == "sqlite":
                sql = ("SELECT c.record, -bm25(candidates_fts, 0.0, 3.0, 1.0) AS score FROM candidates_fts "
                       "JOIN candidates c ON c.key = candidates_fts.key WHERE candidates_fts MATCH ?" + extra +
                       " ORDER BY score DESC, c.seq LIMIT ?")
            else:
                sql = ("SELECT c.record, ts_rank(c.tsv, to_tsquery('english', ?), 1) AS score FROM candidates c WHERE "
                       + cond + extra + " ORDER BY score DESC, c.seq LIMIT ?")
                params = [qparam, *params]
            rows = tx.rows(sql, [*params, SEARCH_POOL])
        out: list[tuple[Candidate, float]] = []
        for record, score in rows:
            cand = _candidate(record)
            if keep is None or keep(cand):
                out.append((cand, round(float(score), 6)))
            if len(out) >= k:
                break
        return out


def _where(alias: str = "", **filters: str | None) -> tuple[str, list[Any]]:
    names = [(name, value) for name, value in filters.items() if value]
    if not names:
        return "", []
    return " WHERE " + " AND ".join(f"{alias}{name} = ?" for name, _ in names), [v for _, v in names]


def _terms(text: str) -> list[str]:
    """The query's words, lower-cased and deduplicated (never the user's text as query syntax)."""
    words = (w.lower() for w in _WORD.findall(text))
    return list(dict.fromkeys(w for w in words if w not in STOP_WORDS))[:MAX_QUERY_TERMS]


def _text_match(dialect: str, terms: list[str], op: str) -> tuple[str, str]:
    """A WHERE clause matching ``terms`` joined by ``op`` (AND/OR), and its one parameter."""
    if dialect == "sqlite":
        return ("c.key IN (SELECT key FROM candidates_fts WHERE candidates_fts MATCH ?)",
                op.join(f'"{t}"' for t in terms))
    return "c.tsv @@ to_tsquery('english', ?)", (" & " if op.strip() == "AND" else " | ").join(terms)
