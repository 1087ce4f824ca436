"""Train a LoRA adapter of all-MiniLM-L6-v2 on (question, passage, hard negative) triples; run on a GPU machine.

    python evals/embedder/train.py --model MODEL_DIR --pairs pairs.jsonl --out adapter.npz [--rank 16 --epochs 3]

Contrastive loss over in-batch negatives plus each row's BM25-mined hard negative (InfoNCE, scale 20, as
sentence-transformers' MultipleNegativesRankingLoss), mean pooling and L2 normalization as the model was
trained. Only LoRA matrices of the attention and feed-forward projections learn; the adapter is saved as
``<weight name>.A`` / ``.B`` arrays and a ``scaling`` so ``kwiki.index.adapter`` can fold it into the base
weights (W + scaling x B @ A) before the ONNX export, with torch alone. Seeded; the data manifest and the
settings used are stored inside the file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from typing import Any

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModel, AutoTokenizer

TARGETS = ["query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense"]


def pool(model: Any, batch: Any) -> Any:
    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=-1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--pairs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--scale", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--negatives", type=int, default=1, help="hard negatives per row (rows list them in 'negatives')")
    args = ap.parse_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    rows = [json.loads(line) for line in open(args.pairs, encoding="utf-8")]
    tok = AutoTokenizer.from_pretrained(args.model)
    base = AutoModel.from_pretrained(args.model, torch_dtype=torch.float32)
    config = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.1, target_modules=TARGETS)
    model = get_peft_model(base, config).cuda().train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.01)
    steps = args.epochs * (len(rows) // args.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=max(steps, 1), pct_start=0.1)
    started = time.time()
    step = 0
    for epoch in range(args.epochs):
        random.shuffle(rows)
        total = 0.0
        for i in range(0, len(rows) - args.batch + 1, args.batch):
            chunk = rows[i : i + args.batch]
            enc = lambda texts, n: {k: v.cuda() for k, v in tok(texts, padding=True, truncation=True, max_length=n,  # noqa: E731
                                                                   return_tensors="pt").items()}
            q = pool(model, enc([r["query"] for r in chunk], 64))
            negs = [r.get("negatives", [r["negative"]])[j] for j in range(args.negatives) for r in chunk]
            d = pool(model, enc([r["positive"] for r in chunk] + negs, 256))
            logits = args.scale * q @ d.T
            # a row's own page may also be another row's positive: mask those duplicates out of the negatives
            pages = [r["page"] for r in chunk]
            same = torch.tensor([[pages[a] == pages[b % len(chunk)] and a != b
                                  for b in range((1 + args.negatives) * len(chunk))]
                                 for a in range(len(chunk))], device=logits.device)
            logits = logits.masked_fill(same, -1e4)
            loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(chunk), device=logits.device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss)
            step += 1
        print(json.dumps({"epoch": epoch, "loss": round(total / max(1, len(rows) // args.batch), 4)}), flush=True)
    arrays: dict[str, np.ndarray] = {}
    for name, module in model.named_modules():
        if hasattr(module, "lora_A") and "default" in getattr(module, "lora_A", {}):
            weight = name.replace("base_model.model.", "") + ".weight"
            arrays[weight + ".A"] = module.lora_A["default"].weight.detach().float().cpu().numpy()
            arrays[weight + ".B"] = module.lora_B["default"].weight.detach().float().cpu().numpy()
    meta = {"rank": args.rank, "alpha": 2 * args.rank, "epochs": args.epochs, "lr": args.lr, "batch": args.batch,
            "scale": args.scale, "seed": args.seed, "negatives": args.negatives, "pairs": len(rows),
            "pairs_sha256": hashlib.sha256(open(args.pairs, "rb").read()).hexdigest(), "targets": TARGETS,
            "seconds": round(time.time() - started, 1)}
    saved: dict[str, Any] = {"scaling": np.array(2.0), "meta": np.array(json.dumps(meta)), **arrays}
    np.savez_compressed(args.out, **saved)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
