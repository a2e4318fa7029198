"""IR helpers that more than one pass uses: pattern routing by op, building torch calls."""
