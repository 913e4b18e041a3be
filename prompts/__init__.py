"""LLM prompt templates, shipped as package data.

``planner/`` holds the planner's templates; :mod:`backend.planner.prompts` reads them with
:mod:`importlib.resources`, so they are found in an installed wheel as in a checkout.
"""
