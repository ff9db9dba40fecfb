"""Tools over finished runs: rescoring, comparing runs, counterfactual rules, the planted fit."""
