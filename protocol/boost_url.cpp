// Boost.URL is header-only in Boost 1.81 only when exactly one translation
// unit compiles its sources; this is that unit (there is no libboost_url).
#include <boost/url/src.hpp>
