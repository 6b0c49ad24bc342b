"""Linear probes: softmax regression on frozen biLM features, as scikit-learn estimators.

Two estimators, both ``fit / predict / predict_proba / decision_function / score`` with their
hyperparameters in ``__init__`` and learned attributes ending in ``_``:

- ``LinearProbe``: multinomial logistic regression with an L2 penalty on features whitened
  (by default) from the training set inside the model. Loss = mean cross-entropy +
  alpha/2 ||W||^2 over whitened features (the bias is not penalised). Trained full batch with
  L-BFGS (strong Wolfe line search) in float32 torch. The whitening is folded into the weights,
  so the (n, d) float32 X is used in place, never copied.
- ``ScalarMixProbe``: ELMo's downstream recipe, ``gamma * sum_j s_j x_j`` with
  ``s = softmax(w)`` over ``n_layers`` layers, learned jointly with a linear head. X holds the
  layers side by side, layer-major: (n, n_layers * d); each layer is whitened on its own.
  gamma and W share the L2 penalty alpha/2 (||W||^2 + gamma^2), which fixes their otherwise
  free trade-off (at the optimum gamma^2 = ||W||^2); the mix parameters w are not penalised.
  Not convex: ``random_state`` draws the initial w and W, so several seeds show how well
  determined s_j is. Its ``coef_`` is the equivalent linear model on the flat X.

``fit_on_dev`` chooses alpha on a development set: a path from strong to weak regularisation,
each fit warm-started from the previous one, stopped early once the dev score stops improving.

Why whitening, and why not ``sklearn.linear_model.LogisticRegression``: biLM features are
strongly correlated, which makes the softmax loss badly conditioned. Measured on a 2-core CPU machine
(one thread, 57k EWT training tokens, 512-d layer 1 of a random biLM shaped like elmo-mini, 49
tags): this probe, whitened, 30 L-BFGS iterations: 6.3 s, dev accuracy 77.4%; the same on
standardised features was still improving after 300 iterations (76.0%); scikit-learn's lbfgs on
standardised features: 100 iterations 13 s (73.2%), 300 iterations 39 s (75.9%).
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from probing.engine.envelope import JsonDataclass

log = logging.getLogger(__name__)

DEFAULT_ALPHAS = (1e-2, 1e-3, 1e-4, 1e-5)
"""The regularisation path ``fit_on_dev`` walks, strongest first."""

_PREDICT_ROWS = 16384  # rows per block when predicting: bounds the float64 temporaries


PREPROCESSING = ("whiten", "standardize", "none")
_WHITEN_ROWS = 65536  # rows (evenly spaced) that estimate the covariance


def _preprocessing(X: np.ndarray, method: str, shrinkage: float) -> tuple[np.ndarray, np.ndarray]:
    """The affine map applied to features before the softmax: ``z = (x - mean) @ P``.

    X (n, d) -> mean (d,) float64 over all rows, P (d, d) float64:
    - "whiten": P = (C + shrinkage * mean_eigenvalue * I)^(-1/2), C the covariance (estimated
      on at most 65,536 evenly spaced rows). Decorrelated features make the loss well
      conditioned, so L-BFGS needs a few dozen iterations where standardised features need
      hundreds; the shrinkage keeps near-null directions from being blown up.
    - "standardize": P = diag(1 / std) (constant columns: 1).
    - "none": P = I, mean = 0.
    """
    if method not in PREPROCESSING:
        raise ValueError(f"preprocess must be one of {PREPROCESSING}, got {method!r}")
    n, d = X.shape
    if method == "none":
        return np.zeros(d), np.eye(d)
    mean = np.zeros(d)
    for start in range(0, n, 65536):  # float64 sums without a float64 copy of X
        mean += X[start:start + 65536].sum(axis=0, dtype=np.float64)
    mean /= n
    rows = X if n <= _WHITEN_ROWS else X[np.linspace(0, n - 1, _WHITEN_ROWS).astype(np.int64)]
    centred = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32)) \
        - torch.from_numpy(mean.astype(np.float32))
    if method == "standardize":
        var = (centred.double() ** 2).mean(dim=0).numpy()
        scale = np.sqrt(var)
        scale[scale < 1e-8 * max(1.0, float(np.abs(mean).max(initial=0.0)))] = 1.0
        return mean, np.diag(1.0 / scale)
    cov = (centred.T @ centred).double() / max(1, len(centred))  # (d, d)
    eigenvalues, vectors = torch.linalg.eigh(cov)
    eigenvalues = eigenvalues.clamp_min(0.0)
    floor = shrinkage * float(eigenvalues.mean())
    if floor <= 0.0:  # every column constant
        return mean, np.eye(d)
    P = (vectors / torch.sqrt(eigenvalues + floor)) @ vectors.T  # symmetric C^(-1/2)
    return mean, P.numpy()


def _as_float32_tensor(X: np.ndarray) -> torch.Tensor:
    """(n, d) -> float32 tensor, sharing memory when X already is contiguous writable float32."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    if not X.flags.writeable:
        X = X.copy()
    return torch.from_numpy(X)


PRODUCT_PRECISIONS = ("fp32", "bf16")
_CONVERT_ROWS = 65536  # rows centred and rounded to bf16 at a time: no float32 copy of X


def _products_operand(X: np.ndarray, mean: np.ndarray, precision: str) -> tuple[torch.Tensor, bool]:
    """The operand of the logits' products and whether it is centred: X itself as float32
    (``"fp32"``), or ``X - mean`` rounded to bf16 once per fit (``"bf16"``: on a CPU with bf16
    units the products take about half the time; centring first keeps the rounding relative to
    each feature's spread, not to its mean)."""
    if precision not in PRODUCT_PRECISIONS:
        raise ValueError(f"precision must be one of {PRODUCT_PRECISIONS}, got {precision!r}")
    if precision == "fp32":
        return _as_float32_tensor(X), False
    out = torch.empty(X.shape, dtype=torch.bfloat16)
    centre = torch.from_numpy(np.asarray(mean, dtype=np.float32))
    for start in range(0, len(X), _CONVERT_ROWS):
        block = torch.from_numpy(np.ascontiguousarray(X[start:start + _CONVERT_ROWS], dtype=np.float32))
        out[start:start + _CONVERT_ROWS] = block - centre
    return out, True


def _padded_classes(k: int) -> int:
    """How many rows the logits' product computes for k classes: k rounded up to a multiple of 8
    for the widths whose product the kernel computes faster that way. Measured on a 2-core AMD
    EPYC (Zen 5; one thread, 100,000 x 512 float32 rows, k from 9 to 63): padded, every k >= 13
    with k % 8 in (3, 5, 6, 7) took 0.55-0.88 of the time (22 chunk tags 0.81, 23 0.66, 47 0.70),
    while k % 8 in (1, 2, 4) gained little or lost (20: 1.04, 49: 0.98). The padded rows are zero,
    and the first k columns came out bit for bit the same."""
    return -(-k // 8) * 8 if k >= 13 and k % 8 in (3, 5, 6, 7) else k


class _Logits(torch.autograd.Function):
    """``F.linear(X, E, c)`` for the probes' (n, k) logits, its product over ``_padded_classes(k)``
    rows. The gradients are autograd's for F.linear: E's is G.T @ X, c's G summed over rows;
    X gets none (the probes' features are constants). A bf16 X (``_products_operand``) takes
    E and G in bf16 too; the products accumulate in float32 and the logits and gradients are
    float32."""

    @staticmethod
    def forward(ctx, X: torch.Tensor, E: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        k = E.shape[0]
        pad = _padded_classes(k) - k
        ctx.save_for_backward(X)
        if pad:
            E, c = torch.cat([E, E.new_zeros(pad, E.shape[1])]), torch.cat([c, c.new_zeros(pad)])
        if X.dtype == torch.bfloat16:
            return (F.linear(X, E.to(torch.bfloat16)).float() + c)[:, :k]
        return F.linear(X, E, c)[:, :k] if pad else F.linear(X, E, c)

    @staticmethod
    def backward(ctx, G: torch.Tensor):
        (X,) = ctx.saved_tensors
        if X.dtype == torch.bfloat16:
            return None, (G.to(torch.bfloat16).T @ X).float(), G.sum(0)
        return None, G.T @ X, G.sum(0)


def _run_lbfgs(params: list[torch.Tensor], loss_fn: Callable[[], torch.Tensor], max_iter: int,
               tol: float) -> tuple[int, float]:
    """Minimise ``loss_fn`` over ``params`` with L-BFGS; returns (iterations, final loss)."""
    optimizer = torch.optim.LBFGS(params, lr=1.0, max_iter=max_iter, max_eval=int(max_iter * 1.25) + 1,
                                  tolerance_grad=tol, tolerance_change=1e-10, history_size=10,
                                  line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    last: list = [None, None]  # the latest evaluation: (its loss, the parameters it was at)

    def recorded() -> torch.Tensor:
        loss = closure()
        last[0], last[1] = float(loss.detach()), [p.detach().clone() for p in params]
        return loss

    optimizer.step(recorded)
    state = optimizer.state[optimizer._params[0]]
    if last[1] is not None and all(torch.equal(p, q) for p, q in zip(params, last[1])):
        final = last[0]  # L-BFGS ended where it last evaluated: that loss, not one more pass over X
    else:
        with torch.no_grad():
            final = float(loss_fn())
    return int(state.get("n_iter", 0)), final


class _SoftmaxProbeBase(ClassifierMixin, BaseEstimator):
    """Shared prediction code: a linear model ``X @ coef_.T + intercept_`` over ``classes_``."""

    def _validate_targets(self, y: np.ndarray) -> np.ndarray:
        check_classification_targets(y)
        self.classes_, y_index = np.unique(y, return_inverse=True)
        return y_index.astype(np.int64)

    def decision_function(self, X) -> np.ndarray:
        """Class scores (n, n_classes) float64; (n,) for two classes (score of classes_[1])."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float32, np.float64])
        out = np.empty((X.shape[0], len(self.classes_)))
        for start in range(0, X.shape[0], _PREDICT_ROWS):
            block = X[start:start + _PREDICT_ROWS].astype(np.float64)
            out[start:start + _PREDICT_ROWS] = block @ self.coef_.T + self.intercept_
        if len(self.classes_) == 2:
            return out[:, 1] - out[:, 0]
        return out

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (n, n_classes), rows sum to 1."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            scores = np.stack([np.zeros_like(scores), scores], axis=1)
        scores = scores - scores.max(axis=1, keepdims=True)
        np.exp(scores, out=scores)
        return scores / scores.sum(axis=1, keepdims=True)

    def predict(self, X) -> np.ndarray:
        """The most probable class of each row, (n,) from ``classes_``."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.int64)]
        return self.classes_[np.argmax(scores, axis=1)]

    def _fit_single_class(self, n_features: int) -> None:
        self.coef_ = np.zeros((1, n_features))
        self.intercept_ = np.zeros(1)
        self.n_iter_ = 0
        self.loss_ = 0.0


class LinearProbe(_SoftmaxProbeBase):
    """L2-regularised softmax regression on preprocessed (by default whitened) features,
    trained with full-batch L-BFGS in float32.

    ``logits = ((x - mean_) @ P) @ weights_.T + bias_`` with P from ``preprocess``; the
    optimiser works on ``weights_`` and never materialises the preprocessed X (the map is
    folded into the weights, so X (n, d) float32 is used in place).
    Loss = mean cross-entropy + alpha/2 ||weights_||^2 (the bias is not penalised).

    Parameters
    ----------
    alpha : float, L2 penalty on the weights over preprocessed features.
    max_iter : int, L-BFGS iterations at most.
    tol : float, stop when every gradient entry is below this.
    preprocess : "whiten" (default), "standardize" or "none" (see ``_preprocessing``).
    shrinkage : float, covariance shrinkage for "whiten", relative to the mean eigenvalue.
    warm_start : bool, start from the previous fit's weights (same classes and features).
    random_state : int or None. Unused by the deterministic solver (it starts from zero);
        kept so every estimator of the workbench takes one.
    precision : "fp32" (default) or "bf16": the logits' products over X, in float32 or on X
        centred and rounded to bf16 (float32 accumulation; half the time on a CPU with bf16 units,
        test accuracy within 0.01 point of fp32 on elmo-mini's POS layers).

    Attributes
    ----------
    classes_ (k,); coef_ (k, d), intercept_ (k,): the model in the units of X;
    weights_ (k, d), bias_ (k,): over preprocessed features; mean_ (d,), transform_ (d, d):
    the preprocessing; n_iter_, loss_ (final training objective), n_features_in_.
    With one class in y, every prediction is that class.
    """

    def __init__(self, alpha: float = 1e-4, max_iter: int = 100, tol: float = 1e-5,
                 preprocess: str = "whiten", shrinkage: float = 1e-2, warm_start: bool = False,
                 random_state: int | None = None, precision: str = "fp32"):
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.shrinkage = shrinkage
        self.warm_start = warm_start
        self.random_state = random_state
        self.precision = precision

    def preprocessing_of(self, X) -> tuple[np.ndarray, np.ndarray]:
        """The (mean, transform) this probe's ``fit`` computes for X (n, d): compute it once and
        pass it to several fits on the same X (an alpha path, a control task), since it depends on
        X, ``preprocess`` and ``shrinkage`` only; whitening 1,536-wide features costs seconds."""
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-d (n, d), got shape {X.shape}")
        return _preprocessing(X, self.preprocess, self.shrinkage)

    def fit(self, X, y, preprocessing: tuple[np.ndarray, np.ndarray] | None = None) -> "LinearProbe":
        """Fit on X (n, d) and labels y (n,); returns self. ``preprocessing``: the result of
        ``preprocessing_of(X)`` for this X and these settings (None: computed here)."""
        X, y = validate_data(self, X, y, dtype=[np.float32, np.float64])
        if self.alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha}")
        warm = self._warm_parameters()
        y_index = self._validate_targets(y)
        n, d = X.shape
        k = len(self.classes_)
        if preprocessing is None:
            preprocessing = _preprocessing(X, self.preprocess, self.shrinkage)
        mean, transform = preprocessing
        if np.shape(mean) != (d,) or np.shape(transform) != (d, d):
            raise ValueError(f"preprocessing must be (mean (d,), transform (d, d)) for d = {d}, "
                             f"got {np.shape(mean)} and {np.shape(transform)}")
        self.mean_, self.transform_ = np.asarray(mean), np.asarray(transform)
        if k == 1:
            self._fit_single_class(d)
            self.weights_, self.bias_ = np.zeros((1, d)), np.zeros(1)
            return self
        if warm is not None and warm[0].shape == (k, d):
            W0, b0 = warm
        else:
            W0, b0 = np.zeros((k, d)), np.zeros(k)
        W = torch.tensor(W0, dtype=torch.float32, requires_grad=True)
        b = torch.tensor(b0, dtype=torch.float32, requires_grad=True)
        P = torch.tensor(self.transform_, dtype=torch.float32)
        mean = torch.tensor(self.mean_, dtype=torch.float32)
        Xt, centred = _products_operand(X, self.mean_, self.precision)
        yt = torch.from_numpy(y_index)
        alpha = float(self.alpha)

        def loss_fn() -> torch.Tensor:
            effective = W @ P.T  # (k, d): the weights in the units of X
            # _Logits (F.linear) rather than Xt @ effective.T: its backward forms the weight gradient
            # as G.T @ Xt, where autograd's Xt.T @ G is several times slower for few classes (two
            # classes, 32,000 x 1,536 rows: 0.06 s vs 0.33 s a step on a 2-core CPU)
            logits = _Logits.apply(Xt, effective, b if centred else b - effective @ mean)  # (n, k)
            return F.cross_entropy(logits, yt) + 0.5 * alpha * (W * W).sum()

        self.n_iter_, self.loss_ = _run_lbfgs([W, b], loss_fn, self.max_iter, self.tol)
        self.weights_ = W.detach().double().numpy()
        self.bias_ = b.detach().double().numpy()
        self.coef_ = self.weights_ @ self.transform_.T
        self.intercept_ = self.bias_ - self.coef_ @ self.mean_
        return self

    def _warm_parameters(self) -> tuple[np.ndarray, np.ndarray] | None:
        if not self.warm_start or not hasattr(self, "weights_") or len(getattr(self, "classes_", ())) < 2:
            return None
        return self.weights_.copy(), self.bias_.copy()


class ScalarMixProbe(_SoftmaxProbeBase):
    """A learned scalar mix of layers + a linear softmax head, trained jointly (full-batch L-BFGS).

    ``logits = gamma * sum_j s_j * z_j @ W.T + b`` with ``s = softmax(w)`` and z_j layer j
    preprocessed on its own (``(x_j - mean_j) @ P_j``, as ``LinearProbe``); X is
    (n, n_layers * d), layer j in columns j*d:(j+1)*d.

    Parameters
    ----------
    n_layers : int, how many layers X holds side by side.
    alpha : float, L2 penalty alpha/2 (||W||^2 + gamma^2) on the head.
    mix_l2 : float, penalty mix_l2 * ||w||^2 on the pre-softmax mix parameters, which pulls s
        towards the average of the layers (Peters et al. 2018, section 3.4: "lambda ||w||^2 ...
        an inductive bias on the ELMo weights to stay close to an average of all biLM layers").
        The loss is nearly flat along some mixes of correlated layers; this picks one.
    max_iter, tol, preprocess, shrinkage, warm_start : as ``LinearProbe``.
    init_scale : float, standard deviation of the initial w (pre-softmax mix parameters).
    random_state : int or None, seeds the initial w and W.
    precision : "fp32" or "bf16", as ``LinearProbe``.

    Attributes
    ----------
    mix_weights_ (n_layers,) = s_j, summing to 1; scalar_parameters_ (n_layers,) = w;
    gamma_; weights_ (k, d), bias_ (k,): the head over preprocessed mixed features;
    coef_ (k, n_layers * d), intercept_ (k,): the equivalent linear model on X;
    mean_ (n_layers * d,), transform_ (n_layers, d, d); classes_, n_iter_, loss_, n_features_in_.
    """

    def __init__(self, n_layers: int = 3, alpha: float = 1e-4, mix_l2: float = 0.0, max_iter: int = 100,
                 tol: float = 1e-5, preprocess: str = "whiten", shrinkage: float = 1e-2, warm_start: bool = False,
                 init_scale: float = 0.5, random_state: int | None = None, precision: str = "fp32"):
        self.precision = precision
        self.n_layers = n_layers
        self.alpha = alpha
        self.mix_l2 = mix_l2
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.shrinkage = shrinkage
        self.warm_start = warm_start
        self.init_scale = init_scale
        self.random_state = random_state

    def fit(self, X, y, init_head: tuple[np.ndarray, np.ndarray] | None = None,
            preprocessing: Sequence[tuple[np.ndarray, np.ndarray]] | None = None) -> "ScalarMixProbe":
        """Fit on X (n, n_layers * d) and labels y (n,); returns self.

        ``init_head``: optional (weights (k, d), bias (k,)) to start the head from (e.g. a
        ``LinearProbe``'s ``weights_``/``bias_`` on one layer: fewer iterations), classes in
        the order of ``np.unique(y)``. ``preprocessing``: one (mean, transform) per layer, what
        a ``LinearProbe`` with the same settings computes for that layer's columns
        (``preprocessing_of``), so several seeds and the layers' own probes whiten each layer
        once (None: computed here).
        """
        X, y = validate_data(self, X, y, dtype=[np.float32, np.float64])
        L = int(self.n_layers)
        if L < 1:
            raise ValueError(f"n_layers must be >= 1, got {self.n_layers}")
        if X.shape[1] % L:
            raise ValueError(f"X has {X.shape[1]} feature(s), not a multiple of n_layers={L}: "
                             f"expected the {L} layers side by side, (n, {L} * dim)")
        if self.alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha}")
        warm = self._warm_parameters()
        y_index = self._validate_targets(y)
        n, total = X.shape
        d, k = total // L, len(self.classes_)
        self._set_preprocessing(X, L, preprocessing)
        if k == 1:
            self._fit_single_class(total)
            self.scalar_parameters_ = np.zeros(L)
            self.mix_weights_ = np.full(L, 1.0 / L)
            self.gamma_ = 1.0
            self.weights_, self.bias_ = np.zeros((1, d)), np.zeros(1)
            return self
        rng = np.random.default_rng(self.random_state)
        w0 = rng.normal(0.0, self.init_scale, L)
        g0, W0, b0 = 1.0, rng.normal(0.0, 0.01, (k, d)), np.zeros(k)
        if init_head is not None:
            W0, b0 = np.asarray(init_head[0], dtype=np.float64), np.asarray(init_head[1], dtype=np.float64)
            if W0.shape != (k, d) or b0.shape != (k,):
                raise ValueError(f"init_head must be ((k, d), (k,)) = ({(k, d)}, {(k,)}), got ({W0.shape}, {b0.shape})")
        if warm is not None and warm[2].shape == (k, d) and warm[0].shape == (L,):
            w0, g0, W0, b0 = warm
        w = torch.tensor(w0, dtype=torch.float32, requires_grad=True)
        gamma = torch.tensor(float(g0), dtype=torch.float32, requires_grad=True)
        W = torch.tensor(W0, dtype=torch.float32, requires_grad=True)
        b = torch.tensor(b0, dtype=torch.float32, requires_grad=True)
        Xt, centred = _products_operand(X, self.mean_, self.precision)
        P = torch.tensor(self.transform_, dtype=torch.float32)  # (L, d, d)
        mean = torch.tensor(self.mean_, dtype=torch.float32)  # (L * d,)
        yt = torch.from_numpy(y_index)
        alpha, mix_l2 = float(self.alpha), float(self.mix_l2)

        def loss_fn() -> torch.Tensor:
            s = torch.softmax(w, dim=0)
            # the model on the flat X, layer j's block gamma s_j W P_j^T: one product over all
            # layers, whose backward forms the weight gradient as G.T @ Xt (LinearProbe's fast
            # form), where a product per layer on column views of Xt took 1.4x as long an evaluation
            effective = torch.cat([(gamma * s[j]) * (W @ P[j].T) for j in range(L)], dim=1)  # (k, L * d)
            logits = _Logits.apply(Xt, effective, b if centred else b - effective @ mean)  # (n, k)
            return (F.cross_entropy(logits, yt) + 0.5 * alpha * ((W * W).sum() + gamma * gamma)
                    + mix_l2 * (w * w).sum())

        self.n_iter_, self.loss_ = _run_lbfgs([w, gamma, W, b], loss_fn, self.max_iter, self.tol)
        w_np = w.detach().double().numpy()
        self.scalar_parameters_ = w_np
        e = np.exp(w_np - w_np.max())
        self.mix_weights_ = e / e.sum()
        self.gamma_ = float(gamma.detach())
        self.weights_ = W.detach().double().numpy()
        self.bias_ = b.detach().double().numpy()
        # the same model on the flat X: layer j's weights are gamma s_j W P_j^T
        per_layer = [self.gamma_ * self.mix_weights_[j] * self.weights_ @ self.transform_[j].T for j in range(L)]
        self.coef_ = np.concatenate(per_layer, axis=1)  # (k, L * d)
        self.intercept_ = self.bias_ - self.coef_ @ self.mean_
        return self

    def _set_preprocessing(self, X: np.ndarray, L: int, given: Sequence[tuple[np.ndarray, np.ndarray]] | None) -> None:
        """``mean_`` and ``transform_`` of the L layers of X: ``given``, or computed layer by layer."""
        d = X.shape[1] // L
        if given is None:
            stats = [_preprocessing(X[:, j * d:(j + 1) * d], self.preprocess, self.shrinkage) for j in range(L)]
        else:
            stats = list(given)
            if len(stats) != L or any(np.shape(m) != (d,) or np.shape(P) != (d, d) for m, P in stats):
                raise ValueError(f"preprocessing must be {L} pairs (mean (d,), transform (d, d)) for d = {d}")
        self.mean_ = np.concatenate([m for m, _ in stats])
        self.transform_ = np.stack([P for _, P in stats])

    def _warm_parameters(self):
        if not self.warm_start or not hasattr(self, "weights_") or len(getattr(self, "classes_", ())) < 2:
            return None
        return (self.scalar_parameters_.copy(), self.gamma_, self.weights_.copy(), self.bias_.copy())


# --------------------------------------------------------------------------------------------
# Choosing alpha on dev
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PathPoint(JsonDataclass):
    """One fit of a regularisation path: alpha, the dev score, L-BFGS iterations, seconds."""

    alpha: float
    dev_score: float
    n_iter: int
    seconds: float


def fit_on_dev(probe: _SoftmaxProbeBase, X, y, dev_score: Callable[[_SoftmaxProbeBase], float],
               alphas: Sequence[float] = DEFAULT_ALPHAS, patience: int = 1, warm_max_iter: int | None = None,
               preprocessing: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[_SoftmaxProbeBase, list[PathPoint]]:
    """Fit ``probe`` for each alpha (strongest first, each warm-started from the last) and keep
    the one with the best ``dev_score(fitted_probe)`` (higher is better).

    Stops once the dev score has not improved for ``patience`` alphas in a row (early stopping
    on dev). ``warm_max_iter``: L-BFGS iterations of the warm-started fits after the first
    (default: the probe's ``max_iter``; they start near their optimum). ``probe`` is a template
    and stays unfitted; returns a fitted copy and the path.

    A probe with ``preprocessing_of`` (``LinearProbe``) preprocesses X once for the whole path
    (``preprocessing``: already computed for this X; its seconds then count in no point)."""
    if not alphas:
        raise ValueError("fit_on_dev needs at least one alpha")
    current = copy.deepcopy(probe).set_params(warm_start=True)
    best, best_score, path, worse = None, -np.inf, [], 0
    fit_kwargs = {}
    for step, alpha in enumerate(sorted(alphas, reverse=True)):
        if step == 1 and warm_max_iter is not None:
            current.set_params(max_iter=warm_max_iter)
        start = time.perf_counter()
        if hasattr(current, "preprocessing_of"):
            if preprocessing is None:
                preprocessing = current.preprocessing_of(X)
            fit_kwargs = {"preprocessing": preprocessing}
        current.set_params(alpha=alpha).fit(X, y, **fit_kwargs)
        score = float(dev_score(current))
        path.append(PathPoint(float(alpha), score, int(current.n_iter_), time.perf_counter() - start))
        log.debug("alpha=%g dev=%.4f iterations=%d", alpha, score, current.n_iter_)
        if score > best_score:
            best, best_score, worse = copy.deepcopy(current), score, 0
        else:
            worse += 1
            if worse >= patience:
                break
    assert best is not None
    params = probe.get_params()
    best.set_params(warm_start=params["warm_start"], max_iter=params["max_iter"])
    return best, path


__all__ = ["DEFAULT_ALPHAS", "PREPROCESSING", "LinearProbe", "PathPoint", "ScalarMixProbe", "fit_on_dev"]
