"""Readers for the task-set file formats the inspector accepts (plain Python, no Django)."""
