"""Numbers written as words: what an answer may say instead of digits ("two countries")."""

# Up to twenty, the words an answer states a small count in; by value.
NUMBER_WORDS: dict[str, int] = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
