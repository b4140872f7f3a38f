"""Inference: what a trained model is used for. Loading a model file (`checkpoint`), search
(`search`: greedy and beam), `Translator` (`translate`), forced decoding (`score`), ensembles
and checkpoint averages, BLEU/chrF (`evaluate`) and what the tools write (`writers`)."""
