#!/usr/bin/env python3
"""Fetch the real step-labelled training sets and lay them out as ../shared/data/real-steps.

Downloads each set from its public GitHub repository at the commit that
../shared/data/PROVENANCE.md pins (https://github.com/OWNER/REPO/raw/COMMIT/PATH),
checks every download against the git blob id that commit holds, converts it
to the gzip JSONL rows the project reads (scripts/data/real_steps.py, the
stepscore readers) and writes the five files under --out:

  file                          source (repo @ commit, path)
  mr-ben.jsonl.gz               dvlab-research/Mr-Ben @ 6eb1eca8
                                data/{math,physics,chemistry,biology,medicine}.json
  big-bench-mistake.jsonl.gz    WHGTyen/BIG-Bench-Mistake @ 270683a4, the five task .jsonl files
  mathdial.jsonl.gz             eth-lre/verify-then-generate @ 065be043, dataset/dataset.json
  prm800k-phase1-train.jsonl.gz xhghhh/Enhancing-PRM800K @ 5e806449,
                                phase1_train_plus.stepwise-critic.parquet
  prm800k-phase1-test.jsonl.gz  same, phase1_test.stepwise-critic.parquet

QwenLM/ProcessBench @ ee5ae00f (dataset/{gsm8k,math,olympiadbench,omnimath}.json)
is downloaded too, only to leave out training problems that ProcessBench (the
test set) also holds. Nothing else is fetched; Python 3 standard library only
(the PRM800K files are Parquet, read by the small reader at the end of this file).

Conversion (what each output row is):
  Mr-Ben: one row per (question, sampled model); id "mrben-<question key>|<model>",
    domain = Subject, problem = Question + "\\n" + Options, steps = the
    solution's lines as stored, label = First_Error_Step - 1 (0-based),
    -1 when the solution is marked correct.
  BIG-Bench-Mistake: tasks in the order word_sorting, tracking_shuffled_objects,
    logical_deduction, multistep_arithmetic, dyck_languages; id
    "bbm-<task>-<line index>", label = mistake_index (-1 when null), target and
    answer kept, labels_by = "script" for dyck_languages, else "human".
  MathDial: id "mathdial-<index in dataset.json>", steps =
    student_incorrect_solution, label = incorrect_index, error_category kept.
  PRM800K: one row per Parquet row, in file order: problem = instruction,
    prefix = responses, step = next_response, rating (+1/0/-1, null for
    steps a labeller wrote), preferred = is_preferred_response, human_written =
    is_human_response, is_solution, answer. The train file's error_reason
    column (written by the repository's author, not by PRM800K's labellers) is
    dropped. The flattening of openai/prm800k into one row per step is the
    repository's own: this script does not redo it.

Rows left out (each is counted in the output):
  * every row whose problem is also a ProcessBench problem, matched on the
    lower-cased, whitespace-collapsed problem text (Mr-Ben: the question
    without its options);
  * every row whose problem is in EXTRA_EXCLUDED below: problems that the
    maintainers removed because they are in evaluation sets kept outside the
    project. Those sets are not public here, so the problems are listed by
    hash; see the comment at EXTRA_EXCLUDED. --no-extra-exclusions keeps them;
  * a first-error row whose label points past its last step (one Mr-Ben row).

Verification: with the upstream files taken from snapshots of the five
repositories at the pinned commits (blob ids as below), --check reproduced the
shared copy row for row: mr-ben 4,244/4,244, big-bench-mistake 2,186/2,186,
mathdial 866/866, prm800k-phase1-train 51,835/51,835, prm800k-phase1-test
3,212/3,212, and byte-identical JSONL once decompressed (the .gz files
themselves differ only in the gzip header's time stamp).

Usage (from the repository root):
  python3 scripts/data/fetch_real_steps.py                 # download, convert, write ../shared/data/real-steps
  python3 scripts/data/fetch_real_steps.py --out DIR --cache ~/.cache/stepscore-src
  python3 scripts/data/fetch_real_steps.py --check         # convert, compare with ../shared/data/real-steps, write nothing
  python3 scripts/data/fetch_real_steps.py --offline       # no network: validate ../shared/data/real-steps
  python3 scripts/data/fetch_real_steps.py --offline DIR --out OUT   # validate DIR/real-steps, copy to OUT
  python3 scripts/data/fetch_real_steps.py --source-dir DIR --check  # upstream files already under DIR, no network

--cache DIR and --source-dir DIR share one layout: DIR/OWNER/REPO/COMMIT/PATH.
Exit status: 0 when all is well, 1 when --check found a difference, 2 on an error.
"""
import argparse
import collections
import gzip
import hashlib
import json
import os
import re
import shutil
import struct
import sys
import urllib.error
import urllib.request
import zlib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DATA = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data"))

# Upstream repositories at the commits PROVENANCE.md pins, and each file's git
# blob id at that commit: a download is checked against it, so a moved branch,
# a proxy or a truncated transfer cannot slip in different data.
SOURCES = {
    "mr-ben": ("dvlab-research/Mr-Ben", "6eb1eca8861be411838c7c1c189dba208c140e06", {
        "data/math.json": "976b51ef327d1b6a87f54104fb7bf277f04a5f91",
        "data/physics.json": "795ac255acd93b62f5c1d366ddcb30c6b2c9ea9c",
        "data/chemistry.json": "c29f8d31c7e0414099847482d3fed0c71973c309",
        "data/biology.json": "57097c1d31d77ced1733e39afe676683bfb56659",
        "data/medicine.json": "390151d3464ba8f66028b43826c78f3248bd102c",
    }),
    "big-bench-mistake": ("WHGTyen/BIG-Bench-Mistake", "270683a4ecce6f3b22c4ab28a204ab8fa09f2517", {
        "word_sorting.jsonl": "0c775a80855797a885e5be913271a0b6f7b57f95",
        "tracking_shuffled_objects.jsonl": "a5dce6251c41c9cab54b9fa7e9ab4cbeeea9a46a",
        "logical_deduction.jsonl": "fc3c2d283361d03a5a7c91683045ba8b271d0284",
        "multistep_arithmetic.jsonl": "49b23c417082cc81ac8fb33cccfe86f08edef20c",
        "dyck_languages.jsonl": "9be724a8ca6840fc366e92921d3425bacd1c351a",
    }),
    "mathdial": ("eth-lre/verify-then-generate", "065be0433f5e04648a15850aacc532f0e951faea", {
        "dataset/dataset.json": "6eb8845f105e6bd013878ac0ff8b095d1af6cfb1",
    }),
    "prm800k": ("xhghhh/Enhancing-PRM800K", "5e806449f204352f888b1ccdc7eb3ccda479ad8c", {
        "phase1_train_plus.stepwise-critic.parquet": "61c11c6a25941b833ba8225646d6361e6e6f844a",
        "phase1_test.stepwise-critic.parquet": "aa216a855b4616e6ece48b9a11d84d66815efbdf",
    }),
    "processbench": ("QwenLM/ProcessBench", "ee5ae00f2d32205df00655cf9ebbc3caddce0646", {
        "dataset/gsm8k.json": "e0de3bcd65fd4dcf0cfd0ec68c57d84336beabe8",
        "dataset/math.json": "f280cd1295585bd144a7bf0f168a94087a6db741",
        "dataset/olympiadbench.json": "6c8207417429340bbdcbc1f611d328d5d2c5db0c",
        "dataset/omnimath.json": "b92528dbf2dcf292a394574bbe5da5dda497dd0c",
    }),
}

# Output files, their source, and the row counts PROVENANCE.md states.
OUTPUTS = [
    ("mr-ben.jsonl.gz", "mr-ben", 4244),
    ("big-bench-mistake.jsonl.gz", "big-bench-mistake", 2186),
    ("mathdial.jsonl.gz", "mathdial", 866),
    ("prm800k-phase1-train.jsonl.gz", "prm800k", 51835),
    ("prm800k-phase1-test.jsonl.gz", "prm800k", 3212),
]

# Problems removed because they are in evaluation sets kept outside the
# project (PROVENANCE.md: "or in other evaluation sets"). Those sets cannot be
# downloaded from here, so each problem is named by the first 16 hex digits of
# sha256(normalised problem text) (normalise() below). The list was found by
# converting the pinned upstream files and comparing them with the shared copy:
# these are exactly the problems missing from it that ProcessBench does not
# hold and no other rule here explains (each is left out with all its traces);
# PROVENANCE.md's "other evaluation sets" is the stated reason that fits, but
# which set holds which problem is not recorded. The comment gives each
# problem's opening words.
EXTRA_EXCLUDED = {
    # Mr-Ben (3 rows)
    "2489550e8a65bc2f",  # If 4 daps = 7 yaps, and 5 yaps = 3 baps, ...
    # MathDial (19 rows)
    "29f8ffe0a5a234c1",  # Josh decides to take up juggling ...
    "4e7329e86238cc57",  # Karan borrowed $3,650 for five months ...
    "8cf59644ac80bef3",  # Brinley is in Mr. Bert's math class ...
    "fde7aa359264ce01",  # Carla is downloading a 200 GB file ...
    # PRM800K phase 1 test (20 problems, 591 rows)
    "1dde3a328c664c4b",  # Three pencils and a jumbo eraser cost ...
    "32e7c14bd57f8daa",  # At what value of $y$ is there a horizontal asymptote ...
    "4c260ea86aeb0c37",  # A triangle has sides measuring 1 unit and 3 units ...
    "4dad94fcb6ba7d86",  # The product of three consecutive integers is 120 ...
    "60fccff6e46dab22",  # A number is selected at random from 1 through 100 ...
    "72b3635c85284d7d",  # Let $f(x) = 2x-3$ and $g(x) = x+1$ ...
    "75ec05901cc758fc",  # For every positive integer $n$, let $\text{mod}_5 (n)$ ...
    "77266d1bc2ea62ca",  # Determine the remainder of 54 (mod 6).
    "7871fe82888ead4d",  # If $2^8=4^x$, what is the value of $x$?
    "7a0d974a16cbb81a",  # Positive integers $a$, $b$, and $2009$ ...
    "8e7397fcc5415cff",  # Suzanne walks four miles every third day ...
    "935fa5424fdfa1b9",  # The 7th and 8th grades have enrollments of 520 and 650 ...
    "a3aa18b6ca8c3e3c",  # Four points, $A$, $B$, $C$, and $D$ ...
    "a62f67c7ee7df0ca",  # I have a deck of $54$ cards ...
    "c933eb69c319baf6",  # Suppose that $f$ is a polynomial such that ...
    "d1e303679534a965",  # The graph of $f(x)=\frac{2x}{x^2-5x-14}$ ...
    "d714f2713352fd11",  # A right cylindrical tank with circular bases ...
    "e6a3f62b1df6ca87",  # If $\mathbf{a}$ and $\mathbf{b}$ are vectors ...
    "ecc5e595d69b05e4",  # Compute: $0.\overline{7}-0.\overline{4}+0.\overline{2}$ ...
    "ecf55cc645f863b7",  # Find the midpoint of the line segment between $(-5,5)$ ...
}

MRBEN_FILES = ["data/math.json", "data/physics.json", "data/chemistry.json",
               "data/biology.json", "data/medicine.json"]
BBM_TASKS = ["word_sorting", "tracking_shuffled_objects", "logical_deduction",
             "multistep_arithmetic", "dyck_languages"]

FIRST_ERROR_FIELDS = ["id", "source", "domain", "generator", "problem", "steps", "label"]
EXTRA_FIELDS = {
    "big-bench-mistake.jsonl.gz": ["target", "answer", "labels_by"],
    "mathdial.jsonl.gz": ["error_category"],
}
PRM_FIELDS = ["problem", "prefix", "step", "rating", "preferred", "human_written",
              "is_solution", "answer"]


class InputError(Exception):
    """Bad or missing input; the message names the file, line or row and field."""


# ---------------------------------------------------------------- helpers

def normalise(text):
    # The dedup key PROVENANCE.md describes (same as real_steps.py's norm()).
    return re.sub(r"\s+", " ", text.strip().lower())


def problem_hash(text):
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()[:16]


def git_blob_id(data):
    # git's object id of a file's bytes: lets a download be checked against the
    # pinned commit's tree without trusting the server.
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def raw_url(repo, commit, path):
    return "https://github.com/%s/raw/%s/%s" % (repo, commit, path)


class Sources:
    """Upstream files: from --source-dir, else the --cache, else downloaded."""

    def __init__(self, cache=None, source_dir=None):
        self.cache = cache
        self.source_dir = source_dir

    def get(self, key, path):
        repo, commit, blobs = SOURCES[key]
        url = raw_url(repo, commit, path)
        rel = os.path.join(*repo.split("/"), commit, *path.split("/"))
        if self.source_dir:
            local = os.path.join(self.source_dir, rel)
            if not os.path.isfile(local):
                raise InputError("%s: missing (--source-dir holds no copy of %s)" % (local, url))
            data = _read(local)
            where, verb = local, "read"
        elif self.cache and os.path.isfile(os.path.join(self.cache, rel)):
            where, verb = os.path.join(self.cache, rel), "read (cached)"
            data = _read(where)
        else:
            data = download(url)
            where, verb = url, "downloaded"
        got = git_blob_id(data)
        if got != blobs[path]:
            raise InputError("%s: git blob id %s, expected %s (the file %s holds at %s)"
                             % (where, got, blobs[path], path, commit[:8]))
        if verb == "downloaded" and self.cache:
            _write_atomic(os.path.join(self.cache, rel), data)  # only what passed the check
        print("  %s %s (%d bytes)" % (verb, where, len(data)))
        return data, where


def download(url):
    # Plain urllib; GitHub answers /raw/ with a redirect that urlopen follows.
    req = urllib.request.Request(url, headers={"User-Agent": "stepscore-fetch-real-steps"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.read()
    except urllib.error.HTTPError as e:
        raise InputError("download failed: %s: HTTP %d %s" % (url, e.code, e.reason))
    except (urllib.error.URLError, OSError) as e:
        raise InputError("download failed: %s: %s (no internet? try --offline)"
                         % (url, getattr(e, "reason", e)))


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _write_atomic(path, data):
    # Through a .part file, so an interrupted run leaves no half file under the real name.
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".part"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_json(data, where):
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InputError("%s: not UTF-8 at byte %d" % (where, e.start))
    except json.JSONDecodeError as e:
        raise InputError("%s: line %d column %d: %s" % (where, e.lineno, e.colno, e.msg))


def field(rec, name, types, where):
    # One checked access, so a changed upstream format fails with its place named.
    if not isinstance(rec, dict):
        raise InputError("%s: expected a JSON object, found %s" % (where, type(rec).__name__))
    if name not in rec:
        raise InputError("%s: field %r missing" % (where, name))
    val = rec[name]
    if not isinstance(val, types) or (isinstance(val, bool) and bool not in (types if isinstance(types, tuple) else (types,))):
        raise InputError("%s: field %r is %s, expected %s"
                         % (where, name, type(val).__name__,
                            " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))))
    return val


def str_list(rec, name, where):
    val = field(rec, name, list, where)
    for i, s in enumerate(val):
        if not isinstance(s, str):
            raise InputError("%s: field %r item %d is %s, expected str" % (where, name, i, type(s).__name__))
    return val


class Filter:
    """Says why a row's problem must be left out (ProcessBench, EXTRA_EXCLUDED), or None."""

    def __init__(self, processbench, extra):
        self.processbench = processbench
        self.extra = extra

    def reason(self, problem):
        if normalise(problem) in self.processbench:
            return "problem in ProcessBench"
        if self.extra and problem_hash(problem) in EXTRA_EXCLUDED:
            return "problem in an evaluation set outside the project (EXTRA_EXCLUDED)"
        return None


def processbench_problems(src):
    # Normalised problem texts of all four ProcessBench splits.
    out = set()
    for path in SOURCES["processbench"][2]:
        data, where = src.get("processbench", path)
        rows = load_json(data, where)
        if not isinstance(rows, list):
            raise InputError("%s: expected a JSON list of traces" % where)
        for i, r in enumerate(rows):
            out.add(normalise(field(r, "problem", str, "%s: entry %d" % (where, i))))
    return out


# ---------------------------------------------------------------- converters
# Each yields (row, None) for a row kept, or (None, reason) for a row left out.

def convert_mrben(src, flt):
    for path in MRBEN_FILES:
        data, where = src.get("mr-ben", path)
        doc = load_json(data, where)
        if not isinstance(doc, dict):
            raise InputError("%s: expected an object of question id -> list of solutions" % where)
        for key, entries in doc.items():
            if not isinstance(entries, list):
                raise InputError("%s: question %s: expected a list of solutions" % (where, key))
            for j, rec in enumerate(entries):
                at = "%s: question %s, entry %d" % (where, key, j)
                question = field(rec, "Question", str, at)
                options = field(rec, "Options", str, at)
                steps = str_list(rec, "Model_Solution_Steps", at)
                model = field(rec, "Sampled_Model", str, at)
                correct = field(rec, "Model_Solution_Correctness", str, at)
                first = field(rec, "Model_Solution_First_Error_Step", (str, int), at)
                if correct == "correct":
                    label = -1
                elif correct == "incorrect":
                    try:
                        label = int(first) - 1
                    except ValueError:
                        raise InputError("%s: field 'Model_Solution_First_Error_Step' is %r, expected a step number"
                                         % (at, first))
                else:
                    raise InputError("%s: field 'Model_Solution_Correctness' is %r" % (at, correct))
                # Matched on the question alone: ProcessBench has no options.
                why = flt.reason(question)
                if why:
                    yield None, why
                    continue
                if label >= len(steps) or label < -1:
                    yield None, "first-error step past the last line"
                    continue
                # The dict key, not Question_UUID: they differ in 9 physics entries
                # and the shared copy's ids use the key.
                yield {"id": "mrben-%s|%s" % (key, model), "source": "mr-ben",
                       "domain": field(rec, "Subject", str, at), "generator": model,
                       "problem": question + "\n" + options, "steps": steps, "label": label}, None


def convert_bbm(src, flt):
    for task in BBM_TASKS:
        data, where = src.get("big-bench-mistake", task + ".jsonl")
        try:
            lines = data.decode("utf-8").split("\n")
        except UnicodeDecodeError as e:
            raise InputError("%s: not UTF-8 at byte %d" % (where, e.start))
        idx = 0  # the id counts records, not lines
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            at = "%s: line %d" % (where, lineno)
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError("%s: %s" % (at, e.msg))
            problem = field(rec, "input", str, at)
            steps = str_list(rec, "steps", at)
            mistake = field(rec, "mistake_index", (int, type(None)), at)
            label = -1 if mistake is None else mistake
            row_id = "bbm-%s-%d" % (task, idx)
            idx += 1
            why = flt.reason(problem)
            if why:
                yield None, why
                continue
            if label >= len(steps) or label < -1:
                yield None, "first-error step past the last line"
                continue
            yield {"id": row_id, "source": "big-bench-mistake", "domain": task,
                   "generator": "PaLM-2-L", "problem": problem, "steps": steps, "label": label,
                   "target": field(rec, "target", str, at),
                   # null where no "the answer is" could be found in the steps
                   "answer": field(rec, "answer", (str, type(None)), at),
                   # The repository labels dyck_languages with its own script.
                   "labels_by": "script" if task == "dyck_languages" else "human"}, None


def convert_mathdial(src, flt):
    data, where = src.get("mathdial", "dataset/dataset.json")
    doc = load_json(data, where)
    if not isinstance(doc, list):
        raise InputError("%s: expected a JSON list of student solutions" % where)
    for i, rec in enumerate(doc):
        at = "%s: entry %d" % (where, i)
        problem = field(rec, "problem", str, at)
        steps = str_list(rec, "student_incorrect_solution", at)
        label = field(rec, "incorrect_index", int, at)
        category = field(rec, "error_category", str, at)
        why = flt.reason(problem)
        if why:
            yield None, why
            continue
        if not 0 <= label < len(steps):
            yield None, "first-error step past the last line"
            continue
        yield {"id": "mathdial-%d" % i, "source": "mathdial", "domain": "gsm8k-style",
               "generator": "simulated student (LLM)", "problem": problem, "steps": steps,
               "label": label, "error_category": category}, None


def convert_prm800k(src, flt, path):
    data, where = src.get("prm800k", path)
    try:
        nrows, cols = read_parquet(data)
    except (ParquetError, struct.error, IndexError, KeyError) as e:
        raise InputError("%s: cannot read Parquet: %s" % (where, e))
    # The list column's leaf is 'item' in one file and 'element' in the other.
    by_name = {}
    for path_parts, values in cols.items():
        by_name[path_parts[0]] = values
    need = ["instruction", "responses", "next_response", "answer", "is_human_response",
            "is_solution", "is_preferred_response", "rating"]
    for name in need:
        if name not in by_name:
            raise InputError("%s: column %r missing (has %s)" % (where, name, sorted(by_name)))

    def text(name, i, nullable=False):
        v = by_name[name][i]
        if v is None:
            if nullable:
                return None
            raise InputError("%s: row %d: field %r is null" % (where, i, name))
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("%s: row %d: field %r is not UTF-8" % (where, i, name))

    def flag(name, i):
        v = by_name[name][i]
        if not isinstance(v, bool):
            raise InputError("%s: row %d: field %r is %r, expected true/false" % (where, i, name, v))
        return v

    for i in range(nrows):
        problem = text("instruction", i)
        prefix = by_name["responses"][i]
        if prefix is None or any(p is None for p in prefix):
            raise InputError("%s: row %d: field 'responses' is null or holds a null" % (where, i))
        rating = by_name["rating"][i]
        if rating is not None:
            if rating not in (-1, 0, 1):
                raise InputError("%s: row %d: field 'rating' is %r, expected -1, 0, 1 or null" % (where, i, rating))
            rating = int(rating)  # the train file stores doubles
        try:
            prefix = [p.decode("utf-8") for p in prefix]
        except UnicodeDecodeError:
            raise InputError("%s: row %d: field 'responses' is not UTF-8" % (where, i))
        row = {"problem": problem,
               "prefix": prefix,
               "step": text("next_response", i),
               "rating": rating,
               "preferred": flag("is_preferred_response", i),
               "human_written": flag("is_human_response", i),
               "is_solution": flag("is_solution", i),
               "answer": text("answer", i, nullable=True)}
        why = flt.reason(problem)
        if why:
            yield None, why
            continue
        yield row, None


def convert(name, src, flt):
    if name == "mr-ben.jsonl.gz":
        return convert_mrben(src, flt)
    if name == "big-bench-mistake.jsonl.gz":
        return convert_bbm(src, flt)
    if name == "mathdial.jsonl.gz":
        return convert_mathdial(src, flt)
    if name == "prm800k-phase1-train.jsonl.gz":
        return convert_prm800k(src, flt, "phase1_train_plus.stepwise-critic.parquet")
    if name == "prm800k-phase1-test.jsonl.gz":
        return convert_prm800k(src, flt, "phase1_test.stepwise-critic.parquet")
    raise KeyError(name)


def run_conversion(name, src, flt):
    rows, dropped = [], {}
    for row, why in convert(name, src, flt):
        if row is None:
            dropped[why] = dropped.get(why, 0) + 1
        else:
            rows.append(row)
    total = len(rows) + sum(dropped.values())
    print("%s: %d upstream rows, %d kept" % (name, total, len(rows)))
    for why, n in sorted(dropped.items()):
        print("    %d left out: %s" % (n, why))
    return rows


# ---------------------------------------------------------------- output, validation

def encode_rows(rows):
    # One JSON object a line, json.dumps's default separators, UTF-8 not escaped:
    # the shared copy's exact form.
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def write_gz(path, payload):
    # mtime 0: the same rows give the same .gz bytes on every run.
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".part"
    try:
        with open(tmp, "wb") as f:
            with gzip.GzipFile(filename=os.path.basename(path)[:-3], mode="wb", fileobj=f, mtime=0) as gz:
                gz.write(payload)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_local(path):
    """(decompressed bytes, rows) of a shared-copy file; errors name file, line and field."""
    try:
        with gzip.open(path, "rb") as f:
            payload = f.read()
    except FileNotFoundError:
        raise InputError("%s: missing" % path)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError("%s: not a readable gzip file: %s" % (path, e))
    try:
        lines = payload.decode("utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise InputError("%s: not UTF-8 at byte %d of the decompressed file" % (path, e.start))
    if lines and lines[-1] == "":
        lines.pop()
    rows = []  # row i is line i + 1: validate_rows and compare report lines by that
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            raise InputError("%s: line %d: empty line" % (path, lineno))
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise InputError("%s: line %d: %s" % (path, lineno, e.msg))
    return payload, rows


def validate_rows(name, rows, path):
    # The shape the readers rely on; anything else is named by line and field.
    if name.startswith("prm800k"):
        fields = PRM_FIELDS
    else:
        fields = FIRST_ERROR_FIELDS + EXTRA_FIELDS.get(name, [])
    for lineno, r in enumerate(rows, 1):
        at = "%s: line %d" % (path, lineno)
        if not isinstance(r, dict):
            raise InputError("%s: not a JSON object" % at)
        if list(r.keys()) != fields:
            raise InputError("%s: fields %s, expected %s" % (at, list(r.keys()), fields))
        if name.startswith("prm800k"):
            field(r, "problem", str, at)
            str_list(r, "prefix", at)
            field(r, "step", str, at)
            if r["rating"] not in (-1, 0, 1, None) or isinstance(r["rating"], bool):
                raise InputError("%s: field 'rating' is %r, expected -1, 0, 1 or null" % (at, r["rating"]))
            for f in ("preferred", "human_written", "is_solution"):
                field(r, f, bool, at)
            field(r, "answer", (str, type(None)), at)
        else:
            for f in ("id", "source", "domain", "generator", "problem"):
                field(r, f, str, at)
            steps = str_list(r, "steps", at)
            label = field(r, "label", int, at)
            if isinstance(label, bool) or not -1 <= label < len(steps):
                raise InputError("%s: field 'label' is %r, outside -1..%d" % (at, label, len(steps) - 1))


def _row_name(r):
    # How a row is named in the report: its id, else the problem's opening words and the step's.
    if "id" in r:
        return r["id"]
    return "%r / step %r" % (r.get("problem", "")[:40], r.get("step", "")[:30])


def compare(name, rows, payload, local_path):
    """Row-by-row comparison with the shared copy; returns True when identical.

    A row matches when an identical row is in the local file (counted as a
    multiset, so one inserted or missing row does not turn every later row
    into a difference); how many of those sit at the same line is said too.
    """
    try:
        local_payload, local_rows = read_local(local_path)
    except InputError as e:
        print("%s: cannot compare: %s" % (name, e))
        return False
    key = lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False)
    conv_keys = [key(r) for r in rows]
    local_keys = [key(r) for r in local_rows]
    common = collections.Counter(conv_keys) & collections.Counter(local_keys)
    match = sum(common.values())
    same_line = sum(1 for a, b in zip(conv_keys, local_keys) if a == b)
    print("%s: %d rows converted, %d in %s: %d match (%d at the same line), %d differ "
          "(%d converted rows not in the local file, %d local rows not in the conversion); "
          "decompressed bytes %s"
          % (name, len(rows), len(local_rows), local_path, match, same_line,
             max(len(rows), len(local_rows)) - match, len(rows) - match, len(local_rows) - match,
             "identical" if payload == local_payload else "differ"))
    # Name a few unmatched rows; rows with the same id on both sides say which fields differ.
    left = collections.Counter(common)
    local_by_id = {r["id"]: r for r in local_rows if isinstance(r, dict) and "id" in r}
    shown = 0
    for r, k in zip(rows, conv_keys):
        if left[k]:
            left[k] -= 1
            continue
        if shown == 5:
            print("    ...")
            break
        other = local_by_id.get(r.get("id"))
        if other is not None:
            fields = [f for f in list(r) + [f for f in other if f not in r] if r.get(f) != other.get(f)]
            print("    %s: differs in %s" % (_row_name(r), ", ".join(fields)))
        else:
            print("    %s: only in the conversion" % _row_name(r))
        shown += 1
    conv_ids = {r.get("id") for r in rows}
    left = collections.Counter(common)
    shown = 0
    for r, k in zip(local_rows, local_keys):
        if left[k]:
            left[k] -= 1
            continue
        if "id" in r and r["id"] in conv_ids:
            continue  # already reported above
        if shown == 5:
            print("    ...")
            break
        print("    %s: only in the local file" % _row_name(r))
        shown += 1
    return payload == local_payload


# ---------------------------------------------------------------- modes

def mode_offline(data_dir, out_dir, names, force):
    src_dir = os.path.join(data_dir, "real-steps")
    in_place = os.path.realpath(src_dir) == os.path.realpath(out_dir)
    print("offline: validating %s%s" % (src_dir, "" if in_place else ", then copying to %s" % out_dir))
    # Every file is checked before any is copied, so a bad copy never lands half-way.
    checked = []
    for name, _, expected in OUTPUTS:
        if name not in names:
            continue
        path = os.path.join(src_dir, name)
        payload, rows = read_local(path)
        validate_rows(name, rows, path)
        note = "" if len(rows) == expected else " (PROVENANCE.md says %d)" % expected
        print("  %s: %d rows valid%s, content sha256 %s"
              % (name, len(rows), note, hashlib.sha256(payload).hexdigest()[:16]))
        checked.append((name, path))
    if in_place:
        print("left in place: %d files" % len(checked))
        return 0
    for name, path in checked:
        dest = os.path.join(out_dir, name)
        if os.path.exists(dest) and not force and _content(dest) != _content(path):
            raise InputError("%s: exists with other content; pass --force to replace it" % dest)
    os.makedirs(out_dir, exist_ok=True)
    for name, path in checked:
        dest = os.path.join(out_dir, name)
        shutil.copyfile(path, dest + ".part")
        os.replace(dest + ".part", dest)
        print("  copied %s -> %s" % (path, dest))
    return 0


def _content(path):
    # Decompressed bytes, or None for a file that does not read: then it counts as different.
    try:
        return read_local(path)[0]
    except InputError:
        return None


def mode_convert(src, out_dir, check_dir, names, extra, force):
    print("ProcessBench problems (for the dedup):")
    flt = Filter(processbench_problems(src), extra)
    print("  %d distinct problems" % len(flt.processbench))
    status = 0
    for name, _, expected in OUTPUTS:
        if name not in names:
            continue
        rows = run_conversion(name, src, flt)
        payload = encode_rows(rows)
        if check_dir is not None:
            if not compare(name, rows, payload, os.path.join(check_dir, "real-steps", name)):
                status = 1
            continue
        validate_rows(name, rows, name + " (converted)")
        dest = os.path.join(out_dir, name)
        if os.path.exists(dest):
            if _content(dest) == payload:
                print("  %s: unchanged (%d rows)" % (dest, len(rows)))
                continue
            if not force:
                raise InputError("%s: exists with other content; pass --force to replace it" % dest)
        write_gz(dest, payload)
        note = "" if len(rows) == expected else " (PROVENANCE.md says %d)" % expected
        print("  wrote %s (%d rows%s)" % (dest, len(rows), note))
    return status


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Fetch the real step-labelled training sets at their pinned commits and "
                    "convert them to ../shared/data/real-steps/*.jsonl.gz (see the module docstring).")
    ap.add_argument("--out", metavar="DIR", help="where to write the files (default: %s)"
                    % os.path.join(DEFAULT_DATA, "real-steps"))
    ap.add_argument("--cache", metavar="DIR", help="keep downloads under DIR/OWNER/REPO/COMMIT/PATH and reuse them")
    ap.add_argument("--source-dir", metavar="DIR", help="read the upstream files from DIR (layout as --cache) and "
                    "download nothing")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--offline", nargs="?", const=DEFAULT_DATA, metavar="DIR",
                      help="no network: validate DIR/real-steps (default DIR: %s) and copy it to "
                           "--out when --out is elsewhere" % DEFAULT_DATA)
    mode.add_argument("--check", nargs="?", const=DEFAULT_DATA, metavar="DIR",
                      help="convert, then compare row by row with DIR/real-steps (default DIR: %s); "
                           "writes nothing" % DEFAULT_DATA)
    ap.add_argument("--only", action="append", metavar="FILE", choices=[n for n, _, _ in OUTPUTS],
                    help="handle only this output file, e.g. mathdial.jsonl.gz (repeatable)")
    ap.add_argument("--no-extra-exclusions", action="store_true",
                    help="keep the problems in EXTRA_EXCLUDED (then the files will not match the shared copy)")
    ap.add_argument("--force", action="store_true", help="replace output files whose content differs")
    args = ap.parse_args(argv)
    names = set(args.only or [n for n, _, _ in OUTPUTS])
    out_dir = args.out or os.path.join(DEFAULT_DATA, "real-steps")
    try:
        if args.offline is not None:
            if args.source_dir or args.cache:
                ap.error("--offline reads finished files; --cache/--source-dir are for conversion")
            return mode_offline(args.offline, out_dir, names, args.force)
        src = Sources(cache=args.cache, source_dir=args.source_dir)
        return mode_convert(src, out_dir, args.check, names, not args.no_extra_exclusions, args.force)
    except InputError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    except OSError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2


# ---------------------------------------------------------------- Parquet
# A minimal reader for what the PRM800K files use (written by Arrow): Thrift
# compact metadata, Snappy or gzip pages (v1 or v2), PLAIN and dictionary
# encodings, flat columns and one-level lists. Anything else fails by name
# rather than returning wrong data.

class ParquetError(ValueError):
    pass


def _varint(buf, pos):
    out = shift = 0
    while True:
        if pos >= len(buf):
            raise ParquetError("truncated varint at byte %d" % pos)
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7


def _zigzag(n):
    return (n >> 1) ^ -(n & 1)


class _Thrift:
    """Thrift compact protocol: structs come back as {field id: value}."""

    def __init__(self, buf, pos=0):
        self.buf, self.pos = buf, pos

    def value(self, ttype):
        buf = self.buf
        if ttype in (1, 2):  # booleans carry their value in the type nibble
            return ttype == 1
        if ttype == 3:
            self.pos += 1
            return struct.unpack_from("<b", buf, self.pos - 1)[0]
        if ttype in (4, 5, 6):
            n, self.pos = _varint(buf, self.pos)
            return _zigzag(n)
        if ttype == 7:
            self.pos += 8
            return struct.unpack_from("<d", buf, self.pos - 8)[0]
        if ttype == 8:
            n, self.pos = _varint(buf, self.pos)
            self.pos += n
            return bytes(buf[self.pos - n:self.pos])
        if ttype in (9, 10):
            head = buf[self.pos]
            self.pos += 1
            size, etype = head >> 4, head & 0x0F
            if size == 15:
                size, self.pos = _varint(buf, self.pos)
            if etype in (1, 2):  # in lists a boolean is one byte
                out = [buf[p] == 1 for p in range(self.pos, self.pos + size)]
                self.pos += size
                return out
            return [self.value(etype) for _ in range(size)]
        if ttype == 11:
            size, self.pos = _varint(buf, self.pos)
            if size == 0:
                return {}
            kv = buf[self.pos]
            self.pos += 1
            return {self.value(kv >> 4): self.value(kv & 0x0F) for _ in range(size)}
        if ttype == 12:
            return self.struct()
        raise ParquetError("unknown Thrift type %d at byte %d" % (ttype, self.pos))

    def struct(self):
        out, fid = {}, 0
        while True:
            head = self.buf[self.pos]
            self.pos += 1
            if head == 0:
                return out
            delta, ttype = head >> 4, head & 0x0F
            if delta:
                fid += delta
            else:
                n, self.pos = _varint(self.buf, self.pos)
                fid = _zigzag(n)
            out[fid] = self.value(ttype)


def snappy_decompress(buf):
    # Snappy's raw format: a varint length, then literals and back-references.
    n, pos = _varint(buf, 0)
    out = bytearray()
    end = len(buf)
    while pos < end:
        tag = buf[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:
            ln = tag >> 2
            if ln >= 60:
                nb = ln - 59
                ln = int.from_bytes(buf[pos:pos + nb], "little")
                pos += nb
            ln += 1
            out += buf[pos:pos + ln]
            pos += ln
            continue
        if kind == 1:
            ln = ((tag >> 2) & 7) + 4
            off = ((tag >> 5) << 8) | buf[pos]
            pos += 1
        elif kind == 2:
            ln = (tag >> 2) + 1
            off = int.from_bytes(buf[pos:pos + 2], "little")
            pos += 2
        else:
            ln = (tag >> 2) + 1
            off = int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        if off == 0 or off > len(out):
            raise ParquetError("bad Snappy back-reference")
        start = len(out) - off
        if off >= ln:
            out += out[start:start + ln]
        else:  # overlapping copy: repeat the last `off` bytes
            while ln > 0:
                chunk = out[start:start + min(off, ln)]
                out += chunk
                ln -= len(chunk)
    if len(out) != n:
        raise ParquetError("Snappy block gave %d bytes, expected %d" % (len(out), n))
    return bytes(out)


def _rle_hybrid(buf, pos, end, bit_width, count):
    # Parquet's RLE / bit-packed hybrid, used for levels and dictionary indices.
    out = []
    nbytes = (bit_width + 7) // 8
    mask = (1 << bit_width) - 1
    while len(out) < count and pos < end:
        head, pos = _varint(buf, pos)
        if head & 1:
            groups = head >> 1
            nb = groups * bit_width
            chunk = int.from_bytes(buf[pos:pos + nb], "little")
            pos += nb
            out.extend((chunk >> (i * bit_width)) & mask for i in range(groups * 8))
        else:
            v = int.from_bytes(buf[pos:pos + nbytes], "little")
            pos += nbytes
            out.extend([v] * (head >> 1))
    if len(out) < count:
        raise ParquetError("RLE run ended after %d of %d values" % (len(out), count))
    return out[:count]


def _plain(buf, pos, ptype, n):
    if ptype == 6:  # BYTE_ARRAY: 4-byte length, bytes
        out = []
        for _ in range(n):
            ln = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
            out.append(bytes(buf[pos:pos + ln]))
            pos += ln
        return out
    if ptype == 0:  # BOOLEAN: one bit each, low bit first
        bits = int.from_bytes(buf[pos:pos + (n + 7) // 8], "little")
        return [bool((bits >> i) & 1) for i in range(n)]
    fmt = {1: "i", 2: "q", 4: "f", 5: "d"}.get(ptype)
    if fmt is None:
        raise ParquetError("unsupported physical type %d" % ptype)
    return list(struct.unpack_from("<%d%s" % (n, fmt), buf, pos))


def _leaves(schema):
    """(path, physical type, max definition level, max repetition level) of each leaf."""
    out, idx = [], [1]

    def walk(prefix, dl, rl, nchildren):
        for _ in range(nchildren):
            el = schema[idx[0]]
            idx[0] += 1
            rep = el.get(3, 0)  # 0 required, 1 optional, 2 repeated
            d, r = dl + (rep != 0), rl + (rep == 2)
            path = prefix + [el[4].decode("utf-8")]
            if el.get(5):
                walk(path, d, r, el[5])
            else:
                out.append((path, el.get(1), d, r))

    walk([], 0, 0, schema[0].get(5, 0))
    return out


def read_parquet(data):
    """(number of rows, {column path tuple: list of values}) of a whole file."""
    if data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise ParquetError("not a Parquet file (no PAR1 magic)")
    n = struct.unpack_from("<I", data, len(data) - 8)[0]
    meta = _Thrift(data, len(data) - 8 - n).struct()
    leaves = _leaves(meta[2])
    columns = {tuple(p): [] for p, _, _, _ in leaves}
    for rg in meta.get(4, []):
        for chunk, (path, ptype, max_def, max_rep) in zip(rg[1], leaves):
            cm = chunk[3]
            if [p.decode("utf-8") for p in cm[3]] != path:
                raise ParquetError("column chunk %s out of schema order" % cm[3])
            columns[tuple(path)].extend(_read_chunk(data, cm, ptype, max_def, max_rep))
    for path, values in columns.items():
        if len(values) != meta[3]:
            raise ParquetError("column %s has %d values for %d rows" % (".".join(path), len(values), meta[3]))
    return meta[3], columns


def _read_chunk(data, cm, ptype, max_def, max_rep):
    codec, total = cm[4], cm[5]
    pos = min(p for p in (cm.get(11), cm[9]) if p is not None)
    dictionary = None
    defs_all, reps_all, vals_all = [], [], []
    seen = 0
    while seen < total:
        th = _Thrift(data, pos)
        ph = th.struct()
        body = data[th.pos:th.pos + ph[3]]
        pos = th.pos + ph[3]
        if ph[1] == 2:  # dictionary page
            dictionary = _plain(_decompress(body, codec), 0, ptype, ph[7][1])
            continue
        if ph[1] == 0:  # data page v1: levels inside the compressed body
            raw = _decompress(body, codec)
            nv, enc = ph[5][1], ph[5][2]
            p = 0
            reps = defs = None
            if max_rep:
                ln = struct.unpack_from("<I", raw, p)[0]
                reps = _rle_hybrid(raw, p + 4, p + 4 + ln, max_rep.bit_length(), nv)
                p += 4 + ln
            if max_def:
                ln = struct.unpack_from("<I", raw, p)[0]
                defs = _rle_hybrid(raw, p + 4, p + 4 + ln, max_def.bit_length(), nv)
                p += 4 + ln
        elif ph[1] == 3:  # data page v2: levels before the compressed values
            dh = ph[8]
            nv, enc, dl, rl = dh[1], dh[4], dh[5], dh[6]
            reps = _rle_hybrid(body, 0, rl, max_rep.bit_length(), nv) if max_rep else None
            defs = _rle_hybrid(body, rl, rl + dl, max_def.bit_length(), nv) if max_def else None
            rest = body[rl + dl:]
            raw = _decompress(rest, codec) if dh.get(7, True) else bytes(rest)
            p = 0
        else:
            continue  # index pages carry no values
        defs = defs if defs is not None else [max_def] * nv
        reps = reps if reps is not None else [0] * nv
        present = sum(1 for d in defs if d == max_def)
        if enc == 0:
            vals = _plain(raw, p, ptype, present)
        elif enc in (2, 8):
            if dictionary is None:
                raise ParquetError("dictionary-encoded page without a dictionary")
            idx = _rle_hybrid(raw, p + 1, len(raw), raw[p], present) if present else []
            vals = [dictionary[i] for i in idx]
        elif enc == 3 and ptype == 0:
            ln = struct.unpack_from("<I", raw, p)[0]
            vals = [bool(v) for v in _rle_hybrid(raw, p + 4, p + 4 + ln, 1, present)]
        else:
            raise ParquetError("unsupported encoding %d" % enc)
        defs_all += defs
        reps_all += reps
        vals_all += vals
        seen += nv
    return _assemble(defs_all, reps_all, vals_all, max_def, max_rep)


def _assemble(defs, reps, vals, max_def, max_rep):
    # Levels to values: None for a null; for a list column (optional list of
    # optional items: max_def 3, max_rep 1) one Python list a row.
    it = iter(vals)
    if max_rep == 0:
        return [next(it) if d == max_def else None for d in defs]
    if max_rep != 1 or max_def != 3:
        raise ParquetError("only flat columns and one-level lists are supported")
    rows = []
    for d, r in zip(defs, reps):
        if r == 0:
            rows.append(None if d == 0 else [])
        if d >= 2:
            rows[-1].append(next(it) if d == 3 else None)
    return rows


def _decompress(body, codec):
    if codec == 0:
        return bytes(body)
    if codec == 1:
        return snappy_decompress(body)
    if codec == 2:
        return zlib.decompress(bytes(body), 47)
    raise ParquetError("unsupported compression codec %d" % codec)


if __name__ == "__main__":
    sys.exit(main())
