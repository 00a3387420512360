"""Ebbtide's tests, in folders by what they test (README.md, Development)."""
