"""``graphengine train --task link``: a GNN encoder and a decoder trained as a link
predictor, in one process."""

from __future__ import annotations

import argparse
import logging
import sys

import torch

from .errors import INTERRUPTED
from .output import epoch_seconds, print_json
from .train_data import homogeneous_dataset
from .train_node import training_device

log = logging.getLogger("graphengine")


def train_link(args: argparse.Namespace) -> int:
    """Train and evaluate; the final JSON line holds every split's metrics."""
    from graphengine.nn.decoders import build_decoder
    from graphengine.nn.models import build_model
    from graphengine.train.link import LinkTrainer

    device = training_device(args.device)
    torch.manual_seed(args.seed)
    dataset = homogeneous_dataset(args, 1)
    log.info("%s", dataset)
    encoder = build_model(
        args.model,
        dataset.num_features,
        args.hidden,
        args.hidden,
        num_layers=len(args.fanouts),
        dropout=args.dropout,
    )
    trainer = LinkTrainer(
        encoder,
        build_decoder(args.decoder, args.hidden),
        dataset,
        fanouts=args.fanouts,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        seed=args.seed,
        eval_mode=args.eval,
        num_workers=args.num_workers,
        device=device,
        metrics_path=args.metrics,
        progress=not args.no_progress and sys.stderr.isatty(),
    )
    try:
        history = trainer.fit(args.epochs, eval_every=args.eval_every, on_epoch=print_json)
        metrics = trainer.evaluate_all() if args.eval_every > 0 else {}
    except KeyboardInterrupt:
        return INTERRUPTED
    print_json(
        {
            "task": "link",
            "dataset": dataset.name,
            "model": args.model,
            "decoder": args.decoder,
            "epochs": trainer.epoch,
            "train_edges": int(trainer.split.train.edge_label_index.size(1)),
            **metrics,
            **epoch_seconds(history),
        }
    )
    return 0
