"""Step-labelled PRM training data, version 2 (see data/README.md):
`calc` (worked solutions as expressions, errors carried forward),
`sources` (problems and their worked solutions), `style` (surface wording),
driven by scripts/data/gen_prm_data.py."""
