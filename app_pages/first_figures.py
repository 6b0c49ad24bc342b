"""What each page computes before its first figure, with the settings a page opens with.

Not a page. The pages call these functions with their widgets' values, and *Prepare for class*
(``app_pages.prepare``) calls them with the opening values (the ``*_first`` functions), so both go
through the same stores (``app_pages.running``) under the same keys: what the preparation computed
is what a page reads, in this server (Streamlit's caches) and on disk (the activation cache, the
probes' result caches, the structural probe, the learned s_j). Every ``*_first`` function takes the
model and returns nothing; each computes into the caches only.

The backends that import torch are imported inside the functions that run them (first paint).
"""

from __future__ import annotations

from app_pages.data_setup import data_root
from app_pages.inputs import DEFAULT_SEMCOR_LIMIT, single_line
from app_pages.model_choice import model_key
from app_pages.running import (
    anisotropy_baseline,
    cache_key,
    cached_resource,
    cached_result,
    one_step,
    semcor_index,
    semcor_index_is_built,
    semcor_lemma_index,
)
from probing.context.playground import demo_set_names, load_demo_set, parse_labelled  # light: no torch

# --------------------------------------------------------------------------------------------
# Playground
# --------------------------------------------------------------------------------------------

PLAYGROUND_DEMO = "bank"  # the demo set the Playground opens with


def playground_view(model, texts: tuple, word: str, focus: int | None, senses: tuple):
    """The Playground's one computation: ``explore_word`` on the sentences and its same-vs-different
    sense test (None without two labelled senses), kept per model and input (revisiting an input
    is instant). A job of the queue like any other: one biLM pass over up to 32 sentences is small,
    but a class types at once, and each edit is a new input."""

    def work(progress):
        from probing.context.playground import explore_word  # lazy: imports torch (first paint)

        def explore():
            result = explore_word(model, list(texts), word, focus_sentence=focus, senses=list(senses))
            return result, result.sense_contrast_test()

        return one_step(progress, f"Embedding {len(texts)} sentence(s)", explore)

    return cached_result("playground", cache_key(model_key(model), texts, word, focus, senses),
                         f"Embedding {len(texts)} sentence(s)", work, typed=True)


def playground_first(model) -> None:
    """The bank demo set and the shipped sentences' anisotropy baseline (English models)."""
    demo = load_demo_set(PLAYGROUND_DEMO if PLAYGROUND_DEMO in demo_set_names() else demo_set_names()[0])
    contexts, labels = parse_labelled(demo.text)
    playground_view(model, tuple(contexts), demo.word, None, tuple(labels))
    anisotropy_baseline(model, None)


# --------------------------------------------------------------------------------------------
# Sense retrieval and the SemCor searches
# --------------------------------------------------------------------------------------------

RETRIEVAL_EXAMPLE = ("Olivia De Havilland signed to do a Broadway play for Garson.", "play")
RETRIEVAL_K, RETRIEVAL_SCOPE, MAX_QUERY_CHARS = 5, "lemma", 1000


def static_embeddings(model):
    """The static embeddings available offline (the biLM's layer 0 over its vocabulary, the
    shipped word2vec), once per model."""
    from probing.context.static import static_baselines  # lazy: imports torch (first paint)

    return cached_resource("static_baselines", cache_key(model_key(model)),
                           "Loading the static embeddings (layer 0 over the vocabulary, word2vec)",
                           lambda progress: static_baselines(model))


def retriever(model, limit, word: str, scope: str):
    """Sense retrieval's SenseRetriever over the model's SemCor slice with the static embeddings. Until a
    page has built the slice's whole index, a query on one word's lemma searches an index of only the
    sentences that hold the lemmas the word may have (``running.semcor_lemma_index``). None when the
    slice holds none of those lemmas (nothing to search, so the slice's whole index is not built)."""
    # lazy: torch and sklearn load only when the retriever is built (first paint)
    from probing.senses.retrieval import SenseRetriever, lemma_candidates

    root = data_root()
    if scope == "lemma" and not semcor_index_is_built(model, limit):
        lemmas = lemma_candidates(word, root)
        index = semcor_lemma_index(model, limit, ",".join(lemmas), lemmas)
        if index is None:
            return None
        kind, key = "retriever_lemma", cache_key(model_key(model), limit, str(root), lemmas)
    else:
        index = semcor_index(model, limit)
        kind, key = "retriever_static", cache_key(model_key(model), limit, str(root))
    return cached_resource(kind, key, "Loading WordNet for lemmas and glosses", lambda progress: SenseRetriever(
        model, index, static=static_embeddings(model), data_root=root))


def retrieval_query(model, limit, sentence: str, word: str, k: int, scope: str, pos: str | None):
    """``(retriever, result)``: the nearest SemCor occurrences of ``word`` in ``sentence``, per layer;
    ``(None, None)`` when the slice holds none of the lemmas the word may have."""
    found = retriever(model, limit, word, scope)
    if found is None:
        return None, None
    key = cache_key(model_key(model), limit, str(data_root()), sentence, word, k, scope, pos)
    return found, cached_result("retrieval", key, "Finding the nearest SemCor occurrences",
                                lambda progress: found.query(sentence, word, pos=pos, k=k, scope=scope))


def retrieval_first(model) -> None:
    """The first example's neighbours in the default slice, and the anisotropy baseline beside them."""
    sentence, word = single_line(RETRIEVAL_EXAMPLE[0], MAX_QUERY_CHARS), RETRIEVAL_EXAMPLE[1]
    retrieval_query(model, DEFAULT_SEMCOR_LIMIT, sentence, word, RETRIEVAL_K, RETRIEVAL_SCOPE, None)
    anisotropy_baseline(model)


# --------------------------------------------------------------------------------------------
# Layer projections
# --------------------------------------------------------------------------------------------

PROJECTION_DEFAULTS = {"pj_choice": "bank", "pj_typed": "", "pj_pos": "any", "pj_method": "pca", "pj_max": 150,
                       "pj_semcor": True, "pj_demo": True,
                       "pj_text": "The boat drifted towards the bank of the river. | river\n"
                                  "I need to visit the bank to open an account. | money"}
MAX_LINES, MAX_LINE_CHARS = 32, 500


def parse_lines(text: str) -> tuple[list[str], list[str | None], list[str]]:
    """The user's sentences (one a line; ``sentence | label`` gives a sense label), their
    labels (None when unlabelled) and notes on what was cut."""
    notes = []
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if len(lines) > MAX_LINES:
        notes.append(f"{len(lines)} lines given; the first {MAX_LINES} are used.")
        lines = lines[:MAX_LINES]
    sentences, labels = [], []
    for line in lines:
        sentence, bar, label = line.rpartition("|")
        if not bar:
            sentence, label = line, ""
        sentence = sentence.strip()
        if len(sentence) > MAX_LINE_CHARS:
            notes.append(f"a line of {len(sentence):,} characters is cut to its first {MAX_LINE_CHARS}.")
            sentence = sentence[:MAX_LINE_CHARS]
        if sentence:
            sentences.append(sentence)
            labels.append(label.strip() or None)
    return sentences, labels, notes


def projection_settings(model, lemma: str, pos: str | None, demo, own_demo, typed: list[str], labels: list,
                        max_semcor: int, methods: tuple, use_semcor: bool, limit) -> dict:
    """Everything a projection depends on (its key): ``demo`` the demo set added (or None),
    ``own_demo`` the lemma's demo set whose sense names stand for its keys (or None)."""
    return {"model": model_key(model), "lemma": lemma, "data_root": str(data_root()), "pos": pos,
            "sentences": (list(demo.texts) if demo else []) + typed,
            # demo senses as WordNet keys, so SemCor's points of that sense share their colour
            "senses": (demo.key_or_label() if demo else []) + [(own_demo.key_for_label(x) or x) if own_demo else x
                                                                for x in labels],
            "glosses": dict(demo.glosses) if demo else {},
            "max_semcor": int(max_semcor), "methods": list(methods), "semcor": use_semcor, "limit": limit}


def projection(model, settings: dict, index):
    """The projection for ``settings`` over ``index`` (the lemma's SemCor sentences, or None)."""
    # lazy: torch, sklearn and the SemCor reader load only when a projection runs (first paint)
    from probing.senses.projections import project_lemma

    def work(progress):
        return project_lemma(
            model, settings["lemma"], pos=settings["pos"], index=index, data_root=settings["data_root"],
            sentences=settings["sentences"], senses=settings["senses"], sense_glosses=settings["glosses"],
            max_semcor=settings["max_semcor"], methods=settings["methods"], seed=0, progress=progress)

    return cached_result("projection", cache_key(settings), f"Projecting '{settings['lemma']}' layer by layer", work)


def projections_first(model) -> None:
    """bank's SemCor sentences in the default slice, the demo's and the two typed lines, by PCA."""
    lemma = PROJECTION_DEFAULTS["pj_choice"]
    typed, labels, _ = parse_lines(PROJECTION_DEFAULTS["pj_text"])
    demo = load_demo_set(lemma) if lemma in demo_set_names() else None
    settings = projection_settings(model, lemma, None, demo, demo, typed, labels, PROJECTION_DEFAULTS["pj_max"],
                                   ("pca",), True, DEFAULT_SEMCOR_LIMIT)
    index = semcor_lemma_index(model, DEFAULT_SEMCOR_LIMIT, lemma)
    if index is None or len(index.lemma_rows(lemma, None)) == 0:
        index = None  # the page projects the demo's and the typed sentences alone
    projection(model, settings, index)


# --------------------------------------------------------------------------------------------
# Scalar mix
# --------------------------------------------------------------------------------------------

LEARN_CONFIG = {"control": False, "random_bilm": False, "halves": False, "mix": True, "mix_seeds": 3}
MIX_DEFAULTS = {"mx_learn_tasks": ["pos"], "mx_learn_limit": 200, "mx_task": "pos", "mx_limit": 200,
                "mx_sentence": "Olivia De Havilland signed to do a Broadway play for Garson.", "mx_word": "play",
                "mx_k": 5}


def model_checksum(model) -> str:
    """The model's identity in suite results (``elmo_model.bilm.identity``: weights, options, precision),
    so s_j learned in bf16 or with other options are neither shown nor stored in another's place."""
    return model_key(model).rpartition(":")[2]  # the identity, computed once per model (model_key)


def learned_path(model, tasks, limit):
    """The on-disk home of the s_j learned for these settings (shared by every session)."""
    # lazy: probing.tagging.scalar_mix imports torch and sklearn (first paint)
    from probing.tagging.scalar_mix import learned_mix_path

    return learned_mix_path(model_checksum(model), tasks, limit, data_root(), LEARN_CONFIG)


def learn_mix(model, tasks: list[str], limit):
    """s_j and gamma learned for ``tasks`` (the scalar-mix probe, 3 seeds), kept on disk for every session."""
    # lazy: torch and sklearn load only when s_j is learned (first paint)
    from probing.tagging.suite import run_suite
    from probing.tagging.suite_config import SuiteConfig

    def work(progress):
        config = SuiteConfig(**LEARN_CONFIG, precision=getattr(model, "precision", "auto"))  # the sidebar's
        suite = run_suite(model, tasks, data_root=data_root(), limit=limit, progress=progress, config=config)
        suite.to_json(learned_path(model, tasks, limit))  # for every later session (temp file + rename)
        return suite

    key = cache_key(model_key(model), tasks, limit, str(data_root()))
    return key, cached_result("mix_learned", key, "Learning s_j (scalar-mix probe, 3 seeds)", work)


def mix_task(model, task: str, limit):
    """Every layer of ``task``'s first ``limit`` sentences a split, each layer scored alone."""
    # lazy: probing.tagging.scalar_mix imports torch and sklearn (first paint)
    from probing.tagging.scalar_mix import load_mix_task

    root = data_root()
    return cached_resource(
        "mix_task", cache_key(model_key(model), task, limit, str(root)),
        f"Reading every layer of {task} ({'all' if limit is None else limit} sentences a split) and "
        "scoring each layer alone",
        lambda progress: load_mix_task(model, task, data_root=root, limit=limit, progress=progress), large=True)


def mix_retriever(model, limit, word: str):
    """A SenseRetriever for ``word``'s nearest SemCor occurrences: over an index of only the
    sentences that hold the lemmas the word may have until a page has built the slice's whole
    index (``running.semcor_lemma_index``). None when the slice holds none of those lemmas."""
    # lazy: probing.senses.retrieval imports torch and sklearn (first paint)
    from probing.senses.retrieval import SenseRetriever, lemma_candidates

    root = data_root()
    lemmas = None if semcor_index_is_built(model, limit) else lemma_candidates(word, root)
    if lemmas:
        index = semcor_lemma_index(model, limit, ",".join(lemmas), lemmas)
        if index is None:
            return None
    else:
        index = semcor_index(model, limit)
    return cached_resource("retriever_plain", cache_key(model_key(model), limit, str(root), lemmas),
                           "Loading WordNet for lemmas and glosses",
                           lambda progress: SenseRetriever(model, index, data_root=root))


def mix_view_key(model, task: str, limit, weights: list[float], sentence: str, word: str, k: int, semcor_limit):
    """The key of the probe on a hand-set mix (and its neighbours)."""
    return cache_key(model_key(model), task, limit, str(data_root()), [round(w, 4) for w in weights],
                     sentence, word, int(k), semcor_limit)


def mix_view(model, task: str, limit, weights: list[float], sentence: str, word: str, k: int, semcor_limit):
    """``(view, not_in_slice)``: the probe trained on the mix of ``task``'s layers and the SemCor
    occurrences nearest ``word`` of ``sentence`` under it; ``not_in_slice``: the slice holds none of the
    lemmas the word may have. A kept view is read before anything else is loaded."""
    # lazy: probing.tagging.scalar_mix imports torch and sklearn (first paint)
    from probing.senses.retrieval import find_token
    from probing.tagging.scalar_mix import explore_mix

    def work(progress):
        data = mix_task(model, task, limit)
        try:
            searchable = bool(sentence and word) and bool(find_token(sentence, word))
        except ValueError:  # not a word of the sentence: explore_mix says so; no SemCor index needed
            searchable = False
        found = mix_retriever(model, semcor_limit, word) if searchable else None
        return explore_mix(data, weights, retriever=found, sentence=sentence, word=word, k=int(k)), \
            searchable and found is None

    return cached_result("mix_view", mix_view_key(model, task, limit, weights, sentence, word, k, semcor_limit),
                         "Training the probe on your mix", work)


def scalar_mix_first(model) -> None:
    """Panel 1's s_j for POS (kept on disk, read by a new session) and panel 2's probe on the uniform mix."""
    # lazy: probing.tagging.scalar_mix imports torch and sklearn (first paint)
    from probing.tagging.scalar_mix import load_learned_mix

    tasks, limit = list(MIX_DEFAULTS["mx_learn_tasks"]), MIX_DEFAULTS["mx_learn_limit"]
    if load_learned_mix(learned_path(model, tasks, limit)) is None:
        learn_mix(model, tasks, limit)
    n_layers = model.config.n_output_layers
    weights = [float(round(1.0 / n_layers, 2))] * n_layers  # the sliders' opening values
    mix_view(model, MIX_DEFAULTS["mx_task"], MIX_DEFAULTS["mx_limit"], weights,
             single_line(MIX_DEFAULTS["mx_sentence"], MAX_QUERY_CHARS), MIX_DEFAULTS["mx_word"],
             MIX_DEFAULTS["mx_k"], DEFAULT_SEMCOR_LIMIT)


# --------------------------------------------------------------------------------------------
# Syntax
# --------------------------------------------------------------------------------------------

SYNTAX_LAYER, SYNTAX_TRAIN, SYNTAX_RANK = 1, 500, 32  # the tree the Syntax page opens with


def syntax_config(n_train: int, rank: int, treebank: str = "en_ewt"):
    from probing.syntax.structural import SyntaxConfig  # lazy: imports torch (first paint)

    return SyntaxConfig(train_sentences=n_train, dev_sentences=min(200, n_train), ranks=(rank,), random_bilm=False,
                        treebank=treebank)


def tree_probe_key(model, layer: int, n_train: int, rank: int, treebank: str = "en_ewt") -> str:
    other = [treebank] if treebank != "en_ewt" else []  # EWT's probes keep the keys they had
    return cache_key(model_key(model), str(data_root()), layer, n_train, rank, *other)


def tree_probe(model, layer: int, n_train: int, rank: int, treebank: str = "en_ewt"):
    """The structural probe of ``layer`` trained on the first ``n_train`` sentences of ``treebank``
    (UD English-EWT unless the model's language has another; once, then on disk)."""
    # lazy: probing.syntax.structural imports torch and scipy; only when a probe is trained (first paint)
    from probing.syntax.structural import tree_probe as train_or_read

    config, root = syntax_config(n_train, rank, treebank), data_root()
    return cached_resource(
        "tree_probe", tree_probe_key(model, layer, n_train, rank, treebank),
        f"Training the structural probe on layer {layer} ({n_train:,} {treebank} sentences, rank {rank}; once, then "
        "cached)",
        lambda progress: train_or_read(model, layer, root, config=config, progress=progress))


def syntax_first(model) -> None:
    """The structural probe the page opens with."""
    tree_probe(model, SYNTAX_LAYER, SYNTAX_TRAIN, SYNTAX_RANK)


# --------------------------------------------------------------------------------------------
# Probes, Beyond accuracy, Lesson: their first figure is their button's, with the form's defaults
# --------------------------------------------------------------------------------------------

LEXICAL_SAMPLE = "wsd_lexical_sample"
LEXICAL_WORDS = ("hard", "interest", "line", "serve")
PROBES_DEFAULTS = {"pr_tasks": ["pos"], "pr_limit": 200, "pr_words": list(LEXICAL_WORDS), "pr_contexts": 200,
                   "pr_control": True, "pr_random": True, "pr_halves": True, "pr_mix_seeds": 3, "pr_seed": 0}


def probes_settings(model, tasks: list[str], layers: list[int], limit, words: list[str], contexts, control: bool,
                    random_bilm: bool, halves: bool, mix_seeds: int, seed: int, treebank: str | None = None) -> dict:
    """Everything a Probes run depends on (its key); ``treebank``: the UD treebank the POS tasks
    read (None: UD English-EWT)."""
    return {"model": model_key(model), "model_name": str(getattr(model, "name", "") or "biLM"),
            **({"treebank": treebank} if treebank else {}),  # EWT's runs keep the keys they had
            "tasks": list(tasks), "layers": sorted(layers), "limit": limit, "data_root": str(data_root()),
            "words": sorted(words) if LEXICAL_SAMPLE in tasks else [], "contexts": contexts,
            "control": bool(control), "random_bilm": bool(random_bilm), "halves": bool(halves),
            "mix_seeds": int(mix_seeds), "seed": int(seed)}


def probes_run(model, settings: dict):
    """``(key, result)``: the suite and/or the lexical-sample probe for ``settings``, kept per key."""
    def work(progress):
        # lazy: torch and sklearn load only when a run starts (first paint)
        from probing.senses.wsd import lexical_sample_probe
        from probing.tagging.suite import run_suite
        from probing.tagging.suite_config import SuiteConfig

        sequence_tasks = [t for t in settings["tasks"] if t != LEXICAL_SAMPLE]
        suite = lexical = None
        if sequence_tasks:
            config = SuiteConfig(control=settings["control"], random_bilm=settings["random_bilm"],
                                 halves=settings["halves"], mix=settings["mix_seeds"] > 0,
                                 mix_seeds=max(1, settings["mix_seeds"]),
                                 precision=getattr(model, "precision", "auto"))  # the sidebar's
            suite = run_suite(model, sequence_tasks, layers=settings["layers"], data_root=settings["data_root"],
                              seed=settings["seed"], limit=settings["limit"], progress=progress, config=config,
                              treebank=settings.get("treebank"))
        if LEXICAL_SAMPLE in settings["tasks"]:
            lexical = lexical_sample_probe(model, settings["data_root"], words=settings["words"],
                                           max_instances=settings["contexts"], seed=settings["seed"],
                                           progress=progress)
        return {"suite": suite, "lexical": lexical, "settings": settings}

    key = cache_key(settings)
    return key, cached_result("probes", key, "Running the probes", work)


def probes_first(model) -> None:
    """The form's defaults: POS on 200 sentences a split, every layer, controls, halves, 3 mix seeds."""
    d = PROBES_DEFAULTS
    probes_run(model, probes_settings(model, d["pr_tasks"], list(range(model.config.n_output_layers)),
                                      d["pr_limit"], d["pr_words"], d["pr_contexts"], d["pr_control"], d["pr_random"],
                                      d["pr_halves"], d["pr_mix_seeds"], d["pr_seed"]))


INFORMATION_DEFAULTS = {"in_task": "pos", "in_method": "mdl", "in_train": 200, "in_seed": 0}
INFORMATION_PARTNER = {"pos": "chunk", "upos": "chunk", "chunk": "pos", "lexsample": "pos"}  # the erasers' other task


def information_settings(model, task: str, method: str, layer: int, train: int, seed: int) -> dict:
    """Everything a Beyond-accuracy run depends on (its key)."""
    return {"model": model_key(model), "task": task, "method": method, "layer": int(layer), "train": int(train),
            "seed": int(seed), "data_root": str(data_root())}


def _with_eta(progress):
    """The backend's (label, done, total) with the time left, extrapolated from the steps done so far."""
    import time

    start = time.monotonic()

    def report(label: str, done: float, total: float) -> None:
        elapsed = time.monotonic() - start
        left = elapsed / done * (total - done) if done else None
        eta = "" if left is None or done >= total else f" (about {left:.0f} s left at this pace)"
        progress(f"{label}{eta}", done, total)

    return report


def information_run(model, settings: dict, title: str):
    """``(key, result)``: one method, one task, one layer (the erasers: every layer), kept per key."""
    def work(progress):
        # lazy: torch and sklearn load only when a run starts (first paint)
        from probing.information.run import InformationConfig, run_information

        config = InformationConfig(methods=(settings["method"],), train_limit=settings["train"],
                                   eval_limit=max(2, settings["train"] // 2), lm_sentences=50,
                                   lexsample_instances=settings["train"])
        every_layer = settings["method"] == "erasure"  # one chart of all layers: the layers compare
        task = settings["task"]
        tasks = [task, INFORMATION_PARTNER[task]] if every_layer else [task]
        return run_information(model, tasks, layers=None if every_layer else [settings["layer"]], config=config,
                               data_root=settings["data_root"], seed=settings["seed"], progress=_with_eta(progress))

    key = cache_key(settings)
    return key, cached_result("information", key, title, work)


def information_first(model) -> None:
    """The form's defaults: MDL probing of POS at layer 1, 200 training sentences."""
    d = INFORMATION_DEFAULTS
    settings = information_settings(model, d["in_task"], d["in_method"], min(1, model.config.n_output_layers - 1),
                                    d["in_train"], d["in_seed"])
    information_run(model, settings, "Measuring: How easily? MDL probing (online codelength)")


LESSON_STEPS = [
    ("contextual", "1. Static vs contextual", "Does a word get one vector, or one per sentence?"),
    ("senses", "2. Senses by layer", "Are two uses of one sense closer than uses of two senses?"),
    ("pos", "3. Part of speech low, senses high", "Which layer knows part of speech, and which knows senses?"),
    ("control", "4. A probe against its control task", "How much of a probe's accuracy is the layer's own?"),
    ("confound", "5. A confound found and fixed", "Is a sense gap about senses, or about part of speech?"),
]
LESSON_POS_LIMIT = 200  # sentences a split for the probe steps: seconds to a minute on elmo-mini


def lesson_step_key(model, key: str) -> str:
    """Where a step's result is kept: step 3 reuses step 2's senses when step 2 ran first."""
    return cache_key({"model": model_key(model), "step": key, "limit": LESSON_POS_LIMIT})


def lesson_step(model, key: str, title: str):
    """One Lesson step's ``LessonStep``, kept per model (steps 3 and 4 share one POS probe run)."""
    return cached_result("lesson", lesson_step_key(model, key), f"Step {title}",
                         lambda bar: _lesson_compute(model, key, bar))


def _lesson_compute(model, key: str, progress):
    from probing.report import lesson  # lazy: torch and sklearn load when a step runs (first paint)

    if key == "contextual":
        return lesson.static_vs_contextual(model)
    if key == "senses":
        return lesson.senses_by_layer(model)
    if key == "confound":
        return lesson.confound_found_and_fixed(model)
    root = str(data_root())
    pos_task = cached_result("lesson-pos", cache_key({"model": model_key(model), "limit": LESSON_POS_LIMIT,
                                                      "root": root}),
                             "Training the POS probes and their control task",
                             lambda bar: lesson.pos_probe_run(model, root, LESSON_POS_LIMIT, bar))
    if key == "control":
        return lesson.probe_against_control(pos_task)
    senses = cached_result("lesson", lesson_step_key(model, "senses"),
                           "Comparing the senses", lambda bar: lesson.senses_by_layer(model))
    return lesson.pos_against_senses(pos_task, senses)


def lesson_first(model) -> None:
    """The five steps, as their buttons compute them."""
    for key, title, _question in LESSON_STEPS:
        lesson_step(model, key, title)
