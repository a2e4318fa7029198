"""Helpers that more than one test module uses (imported as `helpers.<module>`: pytest puts
test/ on sys.path, as for `corpus`)."""
