"""LLM prompt templates, shipped as package data.

``planner/`` holds the planner's templates; :mod:`domainbench.planner.prompts` reads them with
:mod:`importlib.resources`, so they are found in an installed wheel as in a checkout.
"""
