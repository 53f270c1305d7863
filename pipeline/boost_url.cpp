// Boost.URL is header-only in Boost 1.81 when exactly one translation unit
// includes its sources; this is that unit.
#include <boost/url/src.hpp>
