"""WROP (World Reasoning with Object Permanence): a corpus of tars read in place, continuation scores."""
