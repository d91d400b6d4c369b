"""Full-text search over products: a generated tsvector column, a GIN index, ranked results."""
