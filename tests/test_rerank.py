"""The rerank stage on a tiny cross-encoder built here (random weights, one word planted to
matter): the real loading (onnxruntime, tokenizers) and scoring code, the fused top
candidates reordered, its budget and its failures leaving the fused order."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from memdir import MemoryStore
from memdir.config import Config

from conftest import CliFn

WORDS = ["deploy", "deploys", "steps", "friday", "zebra", "notes", "the", "on", "run"]


def tiny_cross_encoder(folder: Path, planted: str = "zebra") -> Path:
    """A cross-encoder-shaped ONNX model: (input_ids, attention_mask, token_type_ids) ->
    logits [batch, 1], the sum of one random weight per token; ``planted`` weighs 10."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for w in WORDS:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.save(str(folder / "tokenizer.json"))
    weights = np.random.default_rng(7).uniform(-0.1, 0.1, (len(vocab), 1)).astype(np.float32)
    weights[vocab[planted]] = 10.0
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["w", "input_ids"], ["per_token"]),  # [N, L, 1]
            helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3"]),
            helper.make_node("Mul", ["per_token", "mask3"], ["kept"]),
            helper.make_node("ReduceSum", ["kept", "axis1"], ["logits"], keepdims=0),
        ],
        "tiny-cross-encoder",
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        [
            helper.make_tensor("w", TensorProto.FLOAT, weights.shape, weights.flatten()),
            helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
            helper.make_tensor("axis2", TensorProto.INT64, [1], [2]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    return folder


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    store.write("deploy-steps", type="project_fact", description="Deploy steps",
                body="deploy deploy run the deploy steps")  # fmt: skip
    store.write("deploy-friday", type="project_fact", description="Deploys on friday",
                body="deploy on friday")  # fmt: skip
    store.write("deploy-zebra", type="project_fact", description="Zebra notes",
                body="the zebra runbook also covers deploy")  # fmt: skip
    return root


def test_the_stage_reorders_the_fused_candidates_by_the_cross_encoder(
    stored: Path, tmp_path: Path
) -> None:
    """Off, the fused order; on, the model's order over the fused candidates, each with its
    score, in the search of one store and of the scopes alike."""
    from memdir.scopes import Scopes

    plain = MemoryStore(stored, Config(dir=stored, embedder="none"))
    fused = [h.name for h in plain.search("deploy", 3)]
    assert fused[0] != "deploy-zebra" and "deploy-zebra" in fused
    model = tiny_cross_encoder(tmp_path / "tiny")
    config = Config(dir=stored, embedder="none", rerank_model=str(model))
    hits = MemoryStore(stored, config).search("deploy", 3)
    assert hits[0].name == "deploy-zebra" and hits[0].rerank is not None
    assert hits[0].rerank > max(h.rerank or 0.0 for h in hits[1:])
    assert sorted(h.name for h in hits) == sorted(fused)  # reordered, nothing added or lost
    scoped = Scopes(config, project=MemoryStore(stored, config)).search("deploy", 2)
    assert scoped[0].name == "deploy-zebra" and len(scoped) == 2


def test_search_explain_shows_the_stage(stored: Path, tmp_path: Path, cli: CliFn) -> None:
    """'memdir search --explain' names the stage and each hit's rerank score."""
    model = tiny_cross_encoder(tmp_path / "tiny")
    r = cli("search", "deploy", "--explain", env={"MEMDIR_RERANK_MODEL": str(model),
                                                  "MEMDIR_EMBEDDER": "none"})  # fmt: skip
    assert r.code == 0, r.err
    assert "reranked by the cross-encoder" in r.out and "rerank " in r.out
    assert r.out.index("deploy-zebra") < r.out.index("deploy-steps")


def test_past_its_budget_the_fused_order_stands(
    stored: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that has not answered within rerank_budget changes nothing: the fused order,
    no rerank scores (the model is held until the check is done, no clock raced)."""
    from memdir.find import rerank

    model = tiny_cross_encoder(tmp_path / "tiny")
    release = threading.Event()
    real = rerank.CrossEncoder.score

    def slow(self: rerank.CrossEncoder, question: str, texts: list[str]) -> list[float]:
        release.wait(30)
        return real(self, question, texts)

    monkeypatch.setattr(rerank.CrossEncoder, "score", slow)
    config = Config(dir=stored, embedder="none", rerank_model=str(model), rerank_budget=0.05)
    try:
        hits = MemoryStore(stored, config).search("deploy", 3)
    finally:
        release.set()
    plain = MemoryStore(stored, dataclasses.replace(config, rerank_model=None))
    assert [h.name for h in hits] == [h.name for h in plain.search("deploy", 3)]
    assert all(h.rerank is None for h in hits)


def test_a_folder_without_a_model_leaves_search_as_it_was(stored: Path, tmp_path: Path) -> None:
    """rerank_model naming a folder with no model.onnx: one line in the log says why, and
    search answers in the fused order."""
    from memdir.errors import ConfigError
    from memdir.find import rerank

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"no model\.onnx there"):
        rerank.CrossEncoder(empty)
    config = Config(dir=stored, embedder="none", rerank_model=str(empty))
    hits = MemoryStore(stored, config).search("deploy", 3)
    plain = MemoryStore(stored, dataclasses.replace(config, rerank_model=None))
    assert [h.name for h in hits] == [h.name for h in plain.search("deploy", 3)]
