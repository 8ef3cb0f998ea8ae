"""The turn machinery: admission, the claim, the agent and plain branches, context, retrieval, citations, approvals, recovery."""
