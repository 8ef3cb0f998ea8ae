"""The kernel beneath every app: database helpers, input checks, errors and their one classifier, paging, loop lag."""
