"""Losses and update rules only; no process or memory code here."""
