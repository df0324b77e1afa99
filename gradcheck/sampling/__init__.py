"""Where a case's points are drawn: the inputs' domains and bands, points kept in
range and away from kinks and singularities."""
