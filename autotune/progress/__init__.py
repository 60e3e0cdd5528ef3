"""The operator's view of a running study: typed progress events, the study monitor actor (events + Ray metrics),
the ETA, and the console that prints them."""
