"""Explainer training (PGExplainer's and TempME's trainers), moving beside the explainers."""
