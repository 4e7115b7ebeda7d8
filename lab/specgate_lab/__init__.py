"""specgate's lab: how the drafters and model assets of its GPU runs are made. Not part of the
product's wheel; it imports specgate, never the reverse."""
