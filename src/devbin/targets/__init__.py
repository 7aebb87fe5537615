"""What is specific to one architecture family (one package per vendor)."""
