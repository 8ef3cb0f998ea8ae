"""How full-text search reads text: its configuration and how much of a long text it reads."""

# The text search configuration for full-text search. 'simple' would not stem; 'english'
# stems and drops stop words, which suits the descriptions people write.
TEXT_SEARCH_CONFIG = "english"

# Full-text search reads the first this many characters of a description. PostgreSQL refuses a
# tsvector whose lexemes exceed 1 MB ("string is too long for tsvector"), which a long enough
# description reaches; capped, 100,000 characters hold at most 400 kB of lexemes. The whole
# description is still stored, shown and embedded.
SEARCH_DESCRIPTION_CHARS = 100_000
