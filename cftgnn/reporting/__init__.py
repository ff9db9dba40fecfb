"""Reports over finished runs: run discovery, tables, plots and explanation pictures."""
