"""The group coordinator: classic consumer-group protocol and committed offsets."""
